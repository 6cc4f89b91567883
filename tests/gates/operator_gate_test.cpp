#include "gates/operator_gate.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "tests/support/build_paths.h"

namespace sparkglm::gates {
namespace {

const std::string kGates = sparkglm::testing::source_dir() + "/gates";

nlohmann::json row(const std::string& op, int rows) {
  return {{"operator", op},          {"shape", "d=6144"}, {"rows", rows},   {"tolerance", 1e-3},
          {"error", 1e-5},           {"poison_ok", true}, {"finite", true}, {"repeatable", true},
          {"batch_invariant", true}, {"median_us", 10.0}, {"floor_us", 8.0}};
}

nlohmann::json table() {
  return {{"schema", "sparkglm.operators/1"},
          {"operators", {row("rmsnorm", 1), row("rmsnorm", 32), row("gemv", 1)}}};
}

TEST(OperatorGate, CleanTablePasses) {
  const GateResult r = judge_operator_table(load_gate(kGates, "G1"), table());
  EXPECT_EQ(r.status, "pass") << r.summary;
  EXPECT_EQ(r.criteria.size(), 5u);
  EXPECT_NE(r.summary.find("3 operator rows"), std::string::npos);
}

TEST(OperatorGate, EachFailingColumnFailsItsCriterionNamingTheRow) {
  const char* fields[] = {"poison_ok", "finite", "repeatable", "batch_invariant"};
  for (const char* f : fields) {
    nlohmann::json t = table();
    t["operators"][1][f] = false;
    const GateResult r = judge_operator_table(load_gate(kGates, "G1"), t);
    EXPECT_EQ(r.status, "fail") << f;
    int failed = 0;
    for (const CriterionResult& c : r.criteria)
      if (!c.pass) {
        ++failed;
        EXPECT_EQ(c.note, "first: rmsnorm d=6144 rows 32") << f;
      }
    EXPECT_EQ(failed, 1) << f;
  }
  nlohmann::json t = table();
  t["operators"][2]["error"] = 2e-3;  // above its tolerance
  const GateResult r = judge_operator_table(load_gate(kGates, "G1"), t);
  EXPECT_EQ(r.status, "fail");
  EXPECT_FALSE(r.criteria[0].pass);
  EXPECT_EQ(r.criteria[0].observed, "1 of 3 rows fail");
}

TEST(OperatorGate, ATableOfAnotherSchemaIsRefused) {
  nlohmann::json t = table();
  t["schema"] = "something/2";
  EXPECT_THROW(judge_operator_table(load_gate(kGates, "G1"), t), Error);
  EXPECT_THROW(
      judge_operator_table(load_gate(kGates, "G1"), {{"schema", "sparkglm.operators/1"},
                                                     {"operators", nlohmann::json::array()}}),
      Error);
}

}  // namespace
}  // namespace sparkglm::gates
