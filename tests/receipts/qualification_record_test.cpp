#include "receipts/qualification_record.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "receipts/bundle_file.h"
#include "tests/receipts/bundle_fixture.h"
#include "tests/support/build_paths.h"

namespace sparkglm::receipts {
namespace {

json with_artifact(json record) {
  record["artifacts"] = {{{"path", "requests.jsonl"},
                          {"kind", "requests"},
                          {"sha256", std::string(64, 'f')},
                          {"bytes", 10}}};
  record["attestation"] = {{"status", "unattested"}, {"by", ""}, {"date", ""}};
  return record;
}

TEST(QualificationRecord, ValidRecordHasNoProblems) {
  const Problems problems = check_record(with_artifact(valid_record("ok")));
  EXPECT_TRUE(problems.empty()) << text(problems);
}

TEST(QualificationRecord, CollectsEveryProblemWithItsJsonPath) {
  json r = with_artifact(valid_record("ok"));
  r["change"]["candidate"].erase("commit");
  r["change"]["baseline"]["clean_tree"] = "yes";
  r["environment"]["cpu_cores"] = -2;
  r["metrics"][0]["ci95"] = {0.9};
  r["metrics"][0]["candidate"]["samples"][1] = "fast";
  r["workloads"][0]["spec_sha256"] = "abc";
  r["gates"].push_back(r["gates"][0]);
  r["created_at"] = "yesterday";
  const Problems problems = check_record(r);
  EXPECT_EQ(problems.size(), 8u) << text(problems);
  EXPECT_PROBLEM(problems, "change.candidate.commit", "missing (required)");
  EXPECT_PROBLEM(problems, "change.baseline.clean_tree", "expected true or false, got \"yes\"");
  EXPECT_PROBLEM(problems, "environment.cpu_cores", "non-negative integer, got -2");
  EXPECT_PROBLEM(problems, "metrics[0].ci95", "[low, high]");
  EXPECT_PROBLEM(problems, "metrics[0].candidate.samples[1]", "expected a number");
  EXPECT_PROBLEM(problems, "workloads[0].spec_sha256", "64 lowercase hex digits, got \"abc\"");
  EXPECT_PROBLEM(problems, "gates[3].id", "gate G0 is listed twice");
  EXPECT_PROBLEM(problems, "created_at", "YYYY-MM-DDTHH:MM:SSZ");
}

TEST(QualificationRecord, SingleArmRunHasOnlyMeasuredMetrics) {
  json r = with_artifact(valid_record("ok"));
  r["change"]["baseline"] = nullptr;
  EXPECT_PROBLEM(check_record(r), "metrics[0].verdict", "single-arm run");
  json& m = r["metrics"][0];
  m["verdict"] = "measured";
  EXPECT_PROBLEM(check_record(r), "metrics[0].baseline", "baseline null");
  m["baseline"] = nullptr;
  EXPECT_PROBLEM(check_record(r), "metrics[0].ci95", "ci95 null");
  m["change_pct"] = nullptr;
  m["ci95"] = nullptr;
  m["p"] = nullptr;
  r["state"] = "measurement";
  r["change"]["option"] = nullptr;
  EXPECT_TRUE(check_record(r).empty()) << text(check_record(r));
}

TEST(QualificationRecord, AttestedRecordNamesWhoAndWhen) {
  json r = with_artifact(valid_record("ok"));
  r["attestation"]["status"] = "maintainer-reviewed";
  const Problems problems = check_record(r);
  EXPECT_PROBLEM(problems, "attestation.by", "names who");
  EXPECT_PROBLEM(problems, "attestation.date", "UTC timestamp");
  r["attestation"]["signature"] = {{"algorithm", "rsa"}, {"public_key", "AAAA"}, {"value", ""}};
  EXPECT_PROBLEM(check_record(r), "attestation.signature.algorithm", "\"ed25519\"");
  EXPECT_PROBLEM(check_record(r), "attestation.signature.public_key", "32-byte");
  EXPECT_PROBLEM(check_record(r), "attestation.signature.value", "64-byte");
}

TEST(QualificationRecord, NonObjectRecordIsOneProblem) {
  EXPECT_PROBLEM(check_record(json::array()), "(top level)", "expected an object");
}

TEST(QualificationRecord, ArtifactPathRules) {
  for (const char* good :
       {"requests.jsonl", "server/baseline/server.log", "a/b.c/d-e_f", "..a", "a.."})
    EXPECT_TRUE(is_artifact_path(good, nullptr)) << good;
  for (const char* bad : {"", "/x", "x/", "a//b", "./a", "a/./b", "..", "a/..", "a\\b", "a\nb"})
    EXPECT_FALSE(is_artifact_path(bad, nullptr)) << bad;
}

TEST(QualificationRecord, IdsHashesAndLevels) {
  EXPECT_TRUE(is_bundle_id("2026-11-29-g2.tinyglm_micro"));
  for (const char* bad : {"", "-a", ".a", "A", "a/b", "a b"})
    EXPECT_FALSE(is_bundle_id(bad)) << bad;
  EXPECT_TRUE(is_sha256_hex(std::string(64, '0')));
  EXPECT_FALSE(is_sha256_hex(std::string(64, 'F')));
  EXPECT_EQ(level_number("G0"), 0);
  EXPECT_EQ(level_number("G5"), 5);
  EXPECT_EQ(level_number("g2"), -1);
}

TEST(QualificationRecord, ParseRefusesARepeatedKey) {
  EXPECT_THROW(parse_record_text("{\"a\": {\"b\": 1, \"b\": 2}}", "q.json"), Error);
  EXPECT_THROW(parse_record_text("{", "q.json"), Error);
  EXPECT_EQ(parse_record_text("{\"a\": {\"b\": 1}, \"b\": 2}", "q.json")["b"], 2);
}

// The JSON Schema and the C++ checks state the same contract: the same required top-level fields
// and the same enums.
TEST(QualificationSchema, AgreesWithTheCppChecks) {
  const json schema = json::parse(
      read_file(sparkglm::testing::source_dir() + "/receipts/qualification.schema.json"));
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  const json valid = with_artifact(valid_record("ok"));
  std::set<std::string> required_by_cpp;
  for (const auto& [key, _] : valid.items()) {
    json r = valid;
    r.erase(key);
    if (has(check_record(r), key, "missing (required)")) required_by_cpp.insert(key);
  }
  EXPECT_EQ(schema["required"].get<std::set<std::string>>(), required_by_cpp);
  const auto accepted = [&](const char* field, const std::string& value) {
    json r = valid;
    r[field] = value;
    return !has(check_record(r), field, "");
  };
  for (const char* field : {"state", "level"}) {
    const json& property = schema["properties"][field];
    const json& values =
        property.contains("enum") ? property["enum"] : schema["$defs"]["level"]["enum"];
    for (const auto& v : values) EXPECT_TRUE(accepted(field, v.get<std::string>())) << v;
    EXPECT_FALSE(accepted(field, "other"));
  }
  std::vector<std::string> kinds =
      schema["properties"]["artifacts"]["items"]["properties"]["kind"]["enum"];
  EXPECT_EQ(kinds, artifact_kinds());
}

}  // namespace
}  // namespace sparkglm::receipts
