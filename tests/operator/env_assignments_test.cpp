#include "operator/env_assignments.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "tests/support/build_paths.h"

namespace sparkglm::operator_tool {
namespace {

using nlohmann::json;

std::string value_of(const EnvAssignments& e, const std::string& key) {
  for (const EnvAssignment& a : e.assignments)
    if (a.key == key) return a.value;
  return "<absent>";
}

bool skipped(const EnvAssignments& e, const std::string& prefix) {
  return std::any_of(e.skipped.begin(), e.skipped.end(),
                     [&](const std::string& s) { return s.rfind(prefix, 0) == 0; });
}

TEST(EnvAssignments, ReadsAnObjectWithScalarValues) {
  const EnvAssignments e = parse_env_assignments(
      json{{"NCCL_PROTO", "Simple"}, {"N", 3}, {"B", true}, {"bad key", "x"}}, "env");
  EXPECT_EQ(e.form, "object");
  EXPECT_EQ(value_of(e, "NCCL_PROTO"), "Simple");
  EXPECT_EQ(value_of(e, "N"), "3");
  EXPECT_EQ(value_of(e, "B"), "true");
  EXPECT_TRUE(skipped(e, "bad key"));
  EXPECT_THROW(parse_env_assignments(json{{"X", json::array()}}, "env"), Error);
}

TEST(EnvAssignments, ReadsAListAndAnAssignmentString) {
  const EnvAssignments list = parse_env_assignments(json{"A=1", "B=two words", "junk"}, "env");
  EXPECT_EQ(list.form, "list");
  EXPECT_EQ(value_of(list, "B"), "two words");
  EXPECT_TRUE(skipped(list, "junk"));
  const EnvAssignments s = parse_env_assignments("A=1 B='x y' C=", "env");
  EXPECT_EQ(s.form, "assignments");
  EXPECT_EQ(value_of(s, "A"), "1");
  EXPECT_EQ(value_of(s, "B"), "x y");
  EXPECT_TRUE(skipped(s, "C=: a placeholder"));
}

TEST(EnvAssignments, ProseYieldsItsAssignmentsAndListsWhatItSkipped) {
  const EnvAssignments e = extract_prose_assignments(
      "arms the stack (NCCL_IB_HCA set per node, FABRIC_SIBLINGS=1 adds a device), "
      "A_B=1 + C_D=0.6, DIR=/prefix-cache/kv + GB=<half>, XX=nvfp4), YY=2. Also A_B=7.");
  EXPECT_EQ(e.form, "prose");
  EXPECT_EQ(value_of(e, "FABRIC_SIBLINGS"), "1");
  EXPECT_EQ(value_of(e, "A_B"), "1");
  EXPECT_EQ(value_of(e, "C_D"), "0.6");
  EXPECT_EQ(value_of(e, "DIR"), "/prefix-cache/kv");
  EXPECT_EQ(value_of(e, "XX"), "nvfp4");
  EXPECT_EQ(value_of(e, "YY"), "2");
  EXPECT_EQ(value_of(e, "GB"), "<absent>");
  EXPECT_TRUE(skipped(e, "GB=<half>: a placeholder"));
  EXPECT_TRUE(skipped(e, "NCCL_IB_HCA: named without a value"));
  EXPECT_TRUE(skipped(e, "A_B=7: A_B is already assigned 1"));
}

TEST(EnvAssignments, TheSeedRecipesProseGivesItsStatedAssignments) {
  std::ifstream in(sparkglm::testing::test_data_dir() +
                   "/recipes/glm-5-3-flash-nvfp4-on-2x-dgx-spark-atlas-rc4-2-tp2-dflash2-1m.json");
  std::stringstream text;
  text << in.rdbuf();
  const json recipe = json::parse(text.str());
  const EnvAssignments e = parse_env_assignments(recipe["inference"]["env"], "inference.env");
  EXPECT_EQ(e.form, "prose");
  EXPECT_EQ(value_of(e, "ATLAS_RDMA_ALLREDUCE"), "1");
  EXPECT_EQ(value_of(e, "ATLAS_DFLASH_CONV_TWIN"), "nvfp4");
  EXPECT_EQ(value_of(e, "ATLAS_DFLASH2_EDGE"), "0.6");
  EXPECT_EQ(value_of(e, "ATLAS_GLM_KDA_COMMIT_CTAS"), "96");
  EXPECT_EQ(value_of(e, "ATLAS_SSM_TIER_SWAP_DIR"), "/prefix-cache/ssm");
  EXPECT_EQ(value_of(e, "ATLAS_SSM_TIER_SLOTS"), "2");
  EXPECT_EQ(e.assignments.size(), 49u);
  EXPECT_TRUE(skipped(e, "ATLAS_KV_NVME_GB=<half>"));
  EXPECT_TRUE(skipped(e, "NCCL_SOCKET_IFNAME: named without a value"));
}

}  // namespace
}  // namespace sparkglm::operator_tool
