// Forged verdicts that keep every checksum intact: each test edits a copy of a committed bundle
// (re-hashing what it changes, as a careful forger would) and expects the verifier to re-derive
// the truth from the raw records under the gate definitions of gates/.
#include "gates/verdict_rederivation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <sstream>

#include "engine/core/sha256.h"
#include "engine/options/option_registry.h"
#include "gates/change_class_policy.h"
#include "gates/promotion.h"
#include "receipts/attestation.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/qualification_record.h"
#include "tests/receipts/bundle_fixture.h"
#include "tests/support/build_paths.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using receipts::Problem;
using receipts::Problems;
const fs::path kRoot = sparkglm::testing::source_dir();
const char* const kG2 = "2026-11-29-g2-tinyglm-cpu-2core";
const char* const kG1 = "2026-11-29-g1-cuda-operators-h200";

// The problem checks the receipts tests use (tests/receipts/bundle_fixture.h).
using receipts::has;
using receipts::text;

class VerdictRederivation : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sparkglm_verdicts_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "keys");
  }
  void TearDown() override { fs::remove_all(root_); }

  // A copy of a committed bundle, under its own name.
  fs::path copy(const std::string& id) {
    const fs::path to = root_ / id;
    fs::copy(kRoot / "receipts" / "results" / id, to, fs::copy_options::recursive);
    return to;
  }
  receipts::VerifyOptions options() const {
    return full_verification(root_ / "keys", kRoot / "gates");
  }
  static json record_of(const fs::path& bundle) {
    return json::parse(receipts::read_file(bundle / receipts::kManifestName));
  }
  static void save(const fs::path& bundle, const json& record) {
    receipts::write_file_atomically(bundle / receipts::kManifestName,
                                    receipts::record_file_text(record));
  }
  // Rewrites an artifact and its sha256 and bytes in `record`.
  static void replace_artifact(const fs::path& bundle, json& record, const std::string& path,
                               const std::string& bytes) {
    receipts::write_file_atomically(bundle / path, bytes);
    for (json& a : record["artifacts"])
      if (a["path"] == path) {
        a["sha256"] = sha256_hex(bytes);
        a["bytes"] = bytes.size();
      }
  }
  // The record's gate `id`.
  static json& gate(json& record, const std::string& id) {
    for (json& g : record["gates"])
      if (g["id"] == id) return g;
    throw std::runtime_error("no gate " + id);
  }

  fs::path root_;
};

TEST_F(VerdictRederivation, CommittedBundlesReDeriveTheirVerdictsAndMetrics) {
  for (const auto& entry : fs::directory_iterator(kRoot / "receipts" / "results")) {
    const Problems problems = receipts::verify_bundle(entry.path(), options());
    EXPECT_TRUE(problems.empty()) << entry.path().filename() << text(problems);
  }
}

TEST_F(VerdictRederivation, HandWrittenAllPassG4IsRefusedByVerifyAndPromote) {
  const fs::path bundle = copy(kG2);
  json record = record_of(bundle);
  record["level"] = "G4";
  record["state"] = "accepted";
  record["change"]["class"] = "scheduler-cache-parallelism";
  record["change"]["option"] = {{"name", "enable-prefix-caching"}, {"value", true}};
  record["gates"] = json::array();
  for (const char* id : {"G0", "G1", "G2", "G3", "G4"})
    record["gates"].push_back(
        {{"id", id}, {"status", "pass"}, {"summary", "all good"}, {"criteria", json::array()}});
  // Signed by a trusted key, so that only the verdicts are left to catch.
  const std::string key = receipts::generate_key(root_ / "lead.pem");
  receipts::write_file_atomically(root_ / "keys" / "lead.pub", key + "\n");
  record["attestation"] = {
      {"status", "maintainer-reviewed"}, {"by", "lead"}, {"date", "2026-11-30T09:00:00Z"}};
  record["attestation"]["signature"] = receipts::sign_record(record, root_ / "lead.pem");
  save(bundle, record);

  const Problems problems = receipts::verify_bundle(bundle, options());
  EXPECT_PROBLEM(problems, "gates[0].criteria", "marked pass with no criterion");
  EXPECT_PROBLEM(problems, "gates[1]", "no operators.json");
  EXPECT_PROBLEM(problems, "gates[2].criteria", "lacks \"no request failed\", which G2 yields");
  EXPECT_PROBLEM(problems, "gates[3]", "drives matrix, which this bundle did not run");
  EXPECT_PROBLEM(problems, "gates[4]", "drives determinism, quality-probes");
  EXPECT_FALSE(has(problems, "attestation", ""));  // the signature is sound and trusted

  const OptionSpec& option = serving_options().at("enable-prefix-caching");
  const ChangeClassPolicy policy = ChangeClassPolicy::load((kRoot / "gates").string());
  const Problems refused =
      receipt_backs_option(bundle, option, OptionValue(true), policy, options());
  EXPECT_PROBLEM(refused, "gates[4]", "drives determinism");
}

TEST_F(VerdictRederivation, ACriterionCopiedFromAnotherRunIsCaught) {
  const fs::path bundle = copy(kG2);
  json record = record_of(bundle);
  for (json& c : gate(record, "G2")["criteria"])
    if (c["name"] == "no request failed") c["observed"] = 1, c["pass"] = true;
  save(bundle, record);
  EXPECT_PROBLEM(receipts::verify_bundle(bundle, options()), "criteria \"no request failed\"",
                 "says pass with observed 1; re-derived: pass with observed 0");
}

TEST_F(VerdictRederivation, AFailedRequestUnderAPassIsCaught) {
  const fs::path bundle = copy(kG2);
  json record = record_of(bundle);
  std::istringstream in(receipts::read_file(bundle / "requests.jsonl"));
  std::string line, out;
  bool failed = false;
  while (std::getline(in, line)) {
    json r = json::parse(line);
    if (!failed && r["repetition"].get<int>() >= 0) {
      r["ok"] = false;
      r["error"] = "HTTP 500: injected";
      failed = true;
    }
    out += r.dump() + "\n";
  }
  replace_artifact(bundle, record, "requests.jsonl", out);
  save(bundle, record);
  const Problems problems = receipts::verify_bundle(bundle, options());
  EXPECT_PROBLEM(problems, "gates[2].status", "re-derived from the raw records is fail");
  EXPECT_PROBLEM(problems, "criteria \"no request failed\"", "re-derived: fail");
}

TEST_F(VerdictRederivation, ATamperedMetricIsCaughtEvenWhenItsSummaryAgrees) {
  const fs::path bundle = copy(kG2);
  json record = record_of(bundle);
  // wall_s: a metric every version of case_metrics computes (aggregate_decode_tok_s was renamed).
  size_t at = 0;
  while (record["metrics"][at]["name"] != "wall_s") ++at;
  const std::string where = "metrics[" + std::to_string(at) + "]";
  json& m = record["metrics"][at];
  for (json& s : m["candidate"]["samples"]) s = s.get<double>() * 2;
  for (const char* k : {"median", "min", "max"})
    m["candidate"][k] = m["candidate"][k].get<double>() * 2;
  save(bundle, record);
  const Problems problems = receipts::verify_bundle(bundle, options());
  EXPECT_PROBLEM(problems, where + ".candidate", "requests.jsonl gives");
  EXPECT_EQ(problems.size(), 1u) << text(problems);
  // A metric left out, and one that no raw record gives, are caught too.
  record = record_of(bundle);
  record["metrics"][at]["case"] = "no_such_case";
  save(bundle, record);
  const Problems moved = receipts::verify_bundle(bundle, options());
  EXPECT_PROBLEM(moved, where, "does not come from requests.jsonl");
  EXPECT_PROBLEM(moved, "metrics", "a metric left out");
}

TEST_F(VerdictRederivation, G1IsJudgedFromTheOperatorTable) {
  const fs::path bundle = copy(kG1);
  ASSERT_TRUE(receipts::verify_bundle(bundle, options()).empty());
  json record = record_of(bundle);
  json table = json::parse(receipts::read_file(bundle / "operators.json"));
  table["operators"][0]["finite"] = false;
  replace_artifact(bundle, record, "operators.json", table.dump(1) + "\n");
  save(bundle, record);
  const Problems problems = receipts::verify_bundle(bundle, options());
  EXPECT_PROBLEM(problems, "gates[1].status", "G1 re-derived from the raw records is fail");
  EXPECT_PROBLEM(problems, "criteria \"no NaN or Inf\"", "re-derived: fail");
}

TEST_F(VerdictRederivation, APassNoRawRecordCanBackIsCaught) {
  const fs::path bundle = copy(kG1);
  json record = record_of(bundle);
  record["gates"].push_back(
      {{"id", "G5"},
       {"status", "pass"},
       {"summary", "fine"},
       {"criteria",
        {{{"name", "looked fine"}, {"observed", true}, {"threshold", true}, {"pass", true}}}}});
  gate(record, "G0")["criteria"][0]["name"] = "a criterion G0 never had";
  save(bundle, record);
  const Problems problems = receipts::verify_bundle(bundle, options());
  EXPECT_PROBLEM(problems, "gates[2]", "the pass cannot be re-derived");
  EXPECT_PROBLEM(problems, "criteria \"a criterion G0 never had\"", "not a criterion of G0");
}

TEST_F(VerdictRederivation, AFailIsNeverUpgradedButIsLeftAlone) {
  // A gate may under-claim: a fail claims nothing, so it is checked for consistency only.
  const fs::path bundle = copy(kG2);
  json record = record_of(bundle);
  json& g2 = gate(record, "G2");
  g2["status"] = "fail";
  g2["criteria"][0]["pass"] = false;
  save(bundle, record);
  const Problems problems = receipts::verify_bundle(bundle, options());
  EXPECT_TRUE(problems.empty()) << text(problems);
}

}  // namespace
}  // namespace sparkglm::gates
