#include "gates/promotion.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/options/profile.h"
#include "gates/operator_gate.h"
#include "gates/static_gate.h"
#include "gates/verdict_rederivation.h"
#include "receipts/attestation.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_writer.h"
#include "receipts/results_index.h"
#include "tests/support/build_paths.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
const std::string kRoot = sparkglm::testing::source_dir();

json identity(const std::string& label) {
  return {{"label", label},
          {"commit", "0123456789abcdef0123456789abcdef01234567"},
          {"clean_tree", true},
          {"binary_sha256", std::string(64, 'a')},
          {"profile", "8x128k"},
          {"profile_sha256", std::string(64, 'b')},
          {"effective_config_sha256", std::string(64, 'c')},
          {"model",
           {{"preset", "tinyglm"},
            {"config_sha256", std::string(64, 'd')},
            {"weights", "dummy:seed=1"}}},
          {"device", "cpu"},
          {"args", json::array()}};
}

// The operator table of a committed G1 bundle: G1's verdict is re-derived from it by the verifier,
// so the receipts here carry a real one rather than a hand-written pass.
const fs::path kOperators =
    kRoot + "/receipts/results/2026-11-29-g1-cuda-operators-h200/operators.json";

// A gate as the runner writes it. G0 states the repository's checks (not re-derivable from a
// bundle, so only its criteria names are checked); G1 is judged from the operator table.
json gate(const std::string& id, const std::string& status, const std::string& gates_dir) {
  if (id == "G1") {
    GateResult g1 = judge_operator_table(load_gate(gates_dir, "G1"),
                                         json::parse(receipts::read_file(kOperators)));
    if (status == "fail") g1.criteria[0].pass = false, g1.status = "fail";
    return g1.to_json();
  }
  json criteria = json::array();
  for (const Criterion& c : load_gate(gates_dir, id).criteria)
    if (c.check != "ctest")
      criteria.push_back(
          {{"name", c.name}, {"observed", 0}, {"threshold", 0}, {"pass", status == "pass"}});
  return {{"id", id}, {"status", status}, {"summary", status}, {"criteria", criteria}};
}

// The promotion rules are tested under a change-class policy whose default change needs G0 and
// G1 (the repository's needs G2-G4 too, which only a served run re-derives: the G2 bundles of
// receipts/results and gates/verdict_rederivation_test cover those).
struct Receipt {
  std::string state = "accepted";
  std::string level = "G1";
  std::string option = "kv-cache-dtype";  // promotable: prefix caching is refused until it exists
  json value = "fp8_g128";
  json ran_with = "fp8_g128";  // the candidate's effective configuration value
  std::vector<std::pair<std::string, std::string>> gates = {{"G0", "pass"}, {"G1", "pass"}};
  std::string metric_verdict = "better";
  bool attested = true;
  bool through_url = false;  // measured through run --url: the server's identity not observed
};

class Promotion : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("promotion-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "profiles");
    fs::create_directories(root_ / "receipts" / "results");
    fs::create_directories(root_ / "receipts" / "keys");
    fs::copy_file(kRoot + "/profiles/8x128k.json", root_ / "profiles" / "8x128k.json");
    receipts::write_index(root_ / "receipts");
    // The gate definitions of the repository, with the test's change-class policy.
    fs::copy(kRoot + "/gates", gates_dir(), fs::copy_options::recursive);
    json classes = json::parse(receipts::read_file(gates_dir() / "change-classes.json"));
    classes["classes"]["quantization-speculation"]["to_change_default"] = {"G0", "G1"};
    receipts::write_file_atomically(gates_dir() / "change-classes.json", classes.dump(2));
    // A throwaway maintainer key, trusted by the test's receipts/keys only.
    const std::string key = receipts::generate_key(root_ / "lead.pem");
    receipts::write_file_atomically(root_ / "receipts" / "keys" / "lead.pub", key + "\n");
  }
  fs::path gates_dir() const { return root_ / "gates"; }
  void TearDown() override { fs::remove_all(root_); }

  fs::path make(const std::string& id, const Receipt& r) {
    const fs::path dir = root_ / "receipts" / "results" / id;
    receipts::BundleWriter w(dir);
    const json config = {{r.option, r.ran_with}, {"device", "cpu"}};
    w.add_bytes("server/candidate/effective-config.json", config.dump(2), "config");
    w.add_bytes("operators.json", receipts::read_file(kOperators), "operators");
    json gates = json::array();
    for (const auto& [g, s] : r.gates) gates.push_back(gate(g, s, gates_dir().string()));
    json candidate = identity("candidate");
    candidate["effective_config_sha256"] = sha256_hex(config.dump());
    if (r.through_url) candidate["observed"] = "endpoint";
    json record = {{"schema", "sparkglm.qualification/1"},
                   {"id", id},
                   {"title", "t"},
                   {"created_at", "2026-11-29T21:00:00Z"},
                   {"state", r.state},
                   {"level", r.level},
                   {"target", "the option passes"},
                   {"change",
                    {{"class", "scheduler-cache-parallelism"},
                     {"option", {{"name", r.option}, {"value", r.value}}},
                     {"baseline", identity("baseline")},
                     {"candidate", candidate}}},
                   {"environment",
                    {{"host", "h"},
                     {"os", "o"},
                     {"cpu", "c"},
                     {"cpu_cores", 2},
                     {"memory_bytes", 1},
                     {"gpus", json::array()},
                     {"driver", ""},
                     {"cuda", ""},
                     {"nccl", ""},
                     {"compiler", "g"}}},
                   {"workloads", json::array()},
                   {"gates", gates},
                   {"metrics",
                    {{{"name", "wall_s"},
                      {"unit", "s"},
                      {"workload", "w"},
                      {"case", "c"},
                      {"direction", "lower"},
                      {"n", 3},
                      {"baseline",
                       {{"median", 2.0}, {"min", 2.0}, {"max", 2.0}, {"samples", {2.0, 2.0, 2.0}}}},
                      {"candidate",
                       {{"median", 1.0}, {"min", 1.0}, {"max", 1.0}, {"samples", {1.0, 1.0, 1.0}}}},
                      {"change_pct", -50.0},
                      {"ci95", {0.5, 0.5}},
                      {"p", 0.1},
                      {"verdict", r.metric_verdict}}}},
                   {"limitations", json::array()},
                   {"attestation", json{{"status", "unattested"}, {"by", ""}, {"date", ""}}}};
    // Written as the runner writes every bundle, a measurement; a maintainer's `sign` raises it.
    record["state"] = "measurement";
    w.finish(record);
    if (r.attested) {
      const receipts::Problems problems = receipts::sign_bundle(
          dir, root_ / "lead.pem", "tester",
          full_verification(root_ / "receipts" / "keys", gates_dir()), r.state);
      EXPECT_TRUE(problems.empty()) << problems.front().to_string();
    } else if (r.state != "measurement") {
      record = json::parse(receipts::read_file(dir / "qualification.json"));
      record["state"] = r.state;  // a claim in words only, never signed
      receipts::write_file_atomically(dir / "qualification.json", record.dump(2) + "\n");
    }
    receipts::write_index(root_ / "receipts");
    return dir;
  }

  std::string promote_error(const fs::path& bundle, const std::string& value = "fp8_g128") {
    PromoteRequest p;
    p.profile = "8x128k";
    p.profile_dir = (root_ / "profiles").string();
    p.option = "kv-cache-dtype";
    p.value = value;
    p.receipt = bundle;
    p.receipts = root_ / "receipts";
    p.gates = gates_dir();
    try {
      promote(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  GateResult g0() {
    StaticGateInputs in{root_ / "receipts", root_ / "profiles", gates_dir(), {}};
    return evaluate_static_gate(load_gate(kRoot + "/gates", "G0"), in);
  }

  std::string profile_text() {
    std::ifstream in(root_ / "profiles" / "8x128k.json");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path root_;
};

TEST_F(Promotion, AVerifyingReceiptPromotesAndG0AcceptsIt) {
  EXPECT_EQ(g0().status, "pass") << g0().to_json().dump(2);
  const fs::path bundle = make("2026-11-29-prefix-g4", Receipt{});
  EXPECT_EQ(promote_error(bundle), "");
  const Profile p = Profile::load("8x128k", (root_ / "profiles").string());
  EXPECT_EQ(p.values().at("kv-cache-dtype"), OptionValue(std::string("fp8_g128")));
  ASSERT_EQ(p.promotions().count("kv-cache-dtype"), 1u);
  EXPECT_EQ(p.promotions().at("kv-cache-dtype").receipt.id, "2026-11-29-prefix-g4");
  EXPECT_TRUE(p.unbacked_options().empty());
  const GateResult g = g0();
  EXPECT_EQ(g.status, "pass") << g.summary;
}

TEST_F(Promotion, EditingAProfileByHandPromotesNothing) {
  std::string text = profile_text();
  text.replace(text.find("\"block-size\": 16"), 16,
               "\"block-size\": 16, \"kv-cache-dtype\": \"fp8_g128\"");
  std::ofstream(root_ / "profiles" / "8x128k.json") << text;
  const GateResult g = g0();
  EXPECT_EQ(g.status, "fail");
  bool named = false;
  for (const CriterionResult& c : g.criteria)
    named = named || (!c.pass && c.note.find("options.kv-cache-dtype") != std::string::npos);
  EXPECT_TRUE(named);
}

TEST_F(Promotion, ChangingTheReceiptAfterPromotionFailsG0) {
  const fs::path bundle = make("2026-11-29-prefix-g4", Receipt{});
  ASSERT_EQ(promote_error(bundle), "");
  // Re-issue a different record under the same id: the profile's sha256 no longer matches.
  fs::remove_all(bundle);
  Receipt r;
  r.metric_verdict = "neutral-noisy";
  make("2026-11-29-prefix-g4", r);
  const GateResult g = g0();
  EXPECT_EQ(g.status, "fail");
  bool named = false;
  for (const CriterionResult& c : g.criteria)
    named = named || c.note.find("changed after promotion") != std::string::npos;
  EXPECT_TRUE(named) << g.to_json().dump(2);
}

TEST_F(Promotion, RefusalsNameWhatIsMissing) {
  const std::string before = profile_text();
  Receipt low;
  low.level = "G0";
  low.gates = {{"G0", "pass"}};
  EXPECT_NE(promote_error(make("low-level", low)).find("level: G0 is below G1"), std::string::npos);
  Receipt measured;
  measured.state = "measurement";
  measured.attested = false;
  EXPECT_NE(promote_error(make("just-measured", measured)).find("only an accepted"),
            std::string::npos);
  Receipt worse;
  worse.metric_verdict = "worse";
  EXPECT_NE(promote_error(make("regressed", worse)).find("a protected metric regressed"),
            std::string::npos);
  Receipt other;
  other.ran_with = "bf16";  // the candidate did not run with the option
  EXPECT_NE(promote_error(make("not-run-with", other)).find("the candidate ran with"),
            std::string::npos);
  EXPECT_NE(promote_error(make("good", Receipt{}), "bf16").find("change.option.value"),
            std::string::npos);
  Receipt failed_gate;
  failed_gate.gates[1].second = "fail";  // its own level may fail and still be attested
  EXPECT_NE(promote_error(make("g1-failed", failed_gate)).find("gates.G1"), std::string::npos);
  Receipt unsigned_claim;
  unsigned_claim.attested = false;  // accepted in words, never signed
  EXPECT_NE(promote_error(make("unsigned", unsigned_claim)).find("attestation.signature"),
            std::string::npos);
  EXPECT_EQ(profile_text(), before);  // nothing was written by any refusal
}

// A bundle of `run --url` says what a server answered, not which binary and profile it ran: no
// promotion may cite it, however its gates went.
TEST_F(Promotion, ABundleMeasuredThroughUrlPromotesNothing) {
  Receipt r;
  r.through_url = true;
  const std::string why = promote_error(make("2026-12-02-url-g4", r));
  EXPECT_NE(why.find("change.candidate.observed"), std::string::npos) << why;
  EXPECT_EQ(profile_text().find("kv-cache-dtype"), std::string::npos) << "the profile is unchanged";
}

TEST_F(Promotion, OnlyACommittedBundlePromotes) {
  const fs::path bundle = make("2026-11-29-prefix-g4", Receipt{});
  const fs::path elsewhere = root_ / "elsewhere" / "2026-11-29-prefix-g4";
  fs::create_directories(elsewhere.parent_path());
  fs::rename(bundle, elsewhere);
  EXPECT_NE(promote_error(elsewhere).find("a promotion cites a committed bundle"),
            std::string::npos);
}

}  // namespace
}  // namespace sparkglm::gates
