// Forged numbers that keep every checksum intact: the record is re-hashed by the forger, so only
// its consistency with its own samples, times and artifacts catches them.
#include "receipts/record_consistency.h"

#include <gtest/gtest.h>

#include "engine/core/sha256.h"
#include "receipts/bundle_verifier.h"
#include "tests/receipts/bundle_fixture.h"

namespace sparkglm::receipts {
namespace {

class Consistency : public BundleTest {
 protected:
  void SetUp() override {
    BundleTest::SetUp();
    bundle_ = make_bundle("2026-11-29-g2-consistency");
    pristine_ = record_of(bundle_);
    ASSERT_TRUE(verify_bundle(bundle_).empty()) << text(verify_bundle(bundle_));
  }
  Problems after_edit(const std::function<void(json&)>& edit) {
    json record = pristine_;
    edit(record);
    save(bundle_, record);
    return verify_bundle(bundle_);
  }
  // Replaces an artifact's bytes and re-hashes it into the record, as a careful forger would.
  Problems after_artifact(const std::string& path, const std::string& bytes) {
    write(bundle_ / path, bytes);
    json record = pristine_;
    for (json& a : record["artifacts"])
      if (a["path"] == path) {
        a["sha256"] = sha256_hex(bytes);
        a["bytes"] = bytes.size();
      }
    save(bundle_, record);
    return verify_bundle(bundle_);
  }

  fs::path bundle_;
  json pristine_;
};

TEST_F(Consistency, PassWithAFailingCriterionIsCaught) {
  const Problems problems =
      after_edit([](json& r) { r["gates"][2]["criteria"][0]["pass"] = false; });
  EXPECT_PROBLEM(problems, "gates[2].criteria[0].pass", "marked pass but criterion");
  EXPECT_EQ(problems.size(), 1u) << text(problems);
}

TEST_F(Consistency, PassWithNoCriterionAndFailWithNoneFailingAreCaught) {
  EXPECT_PROBLEM(after_edit([](json& r) { r["gates"][2]["criteria"] = json::array(); }),
                 "gates[2].criteria", "marked pass with no criterion");
  EXPECT_PROBLEM(after_edit([](json& r) { r["gates"][2]["status"] = "fail"; }), "gates[2].status",
                 "marked fail but no criterion failed");
}

TEST_F(Consistency, MedianOutsideItsRangeOrNotOfItsSamplesIsCaught) {
  EXPECT_PROBLEM(after_edit([](json& r) { r["metrics"][0]["candidate"]["median"] = 12.0; }),
                 "metrics[0].candidate.median", "lies outside its min..max 9..11");
  EXPECT_PROBLEM(after_edit([](json& r) { r["metrics"][0]["candidate"]["median"] = 10.5; }),
                 "metrics[0].candidate.median", "its samples give 10");
  EXPECT_PROBLEM(after_edit([](json& r) { r["metrics"][0]["baseline"]["max"] = 30.0; }),
                 "metrics[0].baseline.max", "its samples give 11");
  EXPECT_PROBLEM(after_edit([](json& r) { r["metrics"][0]["n"] = 9; }), "metrics[0].n",
                 "the candidate has 3 samples");
}

TEST_F(Consistency, ImpossibleTimestampsAreCaught) {
  EXPECT_PROBLEM(after_edit([](json& r) { r["created_at"] = "2999-01-01T00:00:00Z"; }),
                 "created_at", "lies in the future");
  EXPECT_PROBLEM(after_edit([](json& r) { r["created_at"] = "2026-02-30T12:00:00Z"; }),
                 "created_at", "is no UTC time");
  EXPECT_PROBLEM(after_edit([](json& r) { r["attestation"]["date"] = "2026-11-28T00:00:00Z"; }),
                 "attestation.date", "before the record was created");
  double t = 0;
  EXPECT_TRUE(parse_utc("2026-11-29T21:04:05.25Z", &t));
  EXPECT_DOUBLE_EQ(t, 1795986245.25);
  EXPECT_FALSE(parse_utc("2026-11-29T24:00:00Z", &t));
  EXPECT_FALSE(parse_utc("2026-11-29T21:04:05", &t));
}

TEST_F(Consistency, RequestsWhoseTimesRunBackwardsAreCaught) {
  const std::string lines = requests_jsonl();
  json first = json::parse(lines.substr(0, lines.find('\n')));
  const std::string rest = lines.substr(lines.find('\n') + 1);
  json ends_early = first;
  ends_early["end_s"] = 0.25;  // before start_s 0.5
  EXPECT_PROBLEM(after_artifact("requests.jsonl", ends_early.dump() + "\n" + rest),
                 "requests.jsonl: line 1", "end_s 0.25 is before start_s 0.5");
  json late_token = first;
  late_token["first_output_s"] = 2.0;  // after end_s 1.0
  EXPECT_PROBLEM(after_artifact("requests.jsonl", late_token.dump() + "\n" + rest),
                 "requests.jsonl: line 1", "a first output outside");
  json shuffled = first;
  shuffled["output_event_s"] = {0.9, 0.8};
  EXPECT_PROBLEM(after_artifact("requests.jsonl", shuffled.dump() + "\n" + rest),
                 "requests.jsonl: line 1", "out of order");
}

TEST_F(Consistency, ConfigIdentityOrSpecThatDoNotMatchTheArtifactsAreCaught) {
  EXPECT_PROBLEM(after_edit([](json& r) {
                   r["change"]["baseline"]["effective_config_sha256"] = std::string(64, 'f');
                 }),
                 "change.baseline.effective_config_sha256", "hashes to");
  // A forged config re-hashed into artifacts (it stays on disk; no later check reads it).
  EXPECT_PROBLEM(after_artifact("server/baseline/effective-config.json", "{\"block-size\":32}\n"),
                 "change.baseline.effective_config_sha256", "effective-config.json hashes to");
  EXPECT_PROBLEM(after_edit([](json& r) { r["change"]["baseline"]["commit"] = "feedbeef"; }),
                 "change.baseline", "differs from server/baseline/identity.json");
  EXPECT_PROBLEM(
      after_artifact("workloads/tinyglm-gate.json", "{\"id\":\"tinyglm-gate\",\"x\":1}\n"),
      "workloads[0].spec_sha256", "workloads/tinyglm-gate.json hashes to");
  EXPECT_PROBLEM(after_edit([](json& r) { r["workloads"][0]["id"] = "other"; }), "workloads[0]",
                 "its spec workloads/other.json is not in the bundle");
}

}  // namespace
}  // namespace sparkglm::receipts
