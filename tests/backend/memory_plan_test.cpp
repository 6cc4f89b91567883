// The device memory plan (engine/backend/memory_plan.h): the pool gets what the utilization share
// leaves after what is in use, weights, state, workspace and reserve; explicit budgets must fit the
// device; a plan that cannot hold one block names every part.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "engine/backend/memory_plan.h"
#include "engine/core/error.h"

namespace sparkglm {
namespace {

constexpr size_t kGiB = size_t(1) << 30;

DeviceMemory h200() {
  return {"NVIDIA H200", 140 * kGiB, 139 * kGiB};  // 1 GiB in use before start
}

MemoryDemand demand(size_t weights_gib) {
  MemoryDemand d;
  d.weights = weights_gib * kGiB;
  d.state = kGiB / 4;
  d.workspace = 8 * kGiB;
  d.reserve = 3 * kGiB / 4;
  d.per_block = 1 << 20;  // 1 MiB a block
  return d;
}

std::string error_of(const DeviceMemory& m, const MemoryDemand& d, double util, size_t kv) {
  try {
    plan_kv_pool(m, d, util, kv, 16, INT_MAX, true);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCapacity);
    return e.what();
  }
  return "";
}

TEST(MemoryPlan, ThePoolGetsTheUtilizationShareAfterEverythingElse) {
  const PoolPlan p = plan_kv_pool(h200(), demand(87), 0.9, 0, 16, INT_MAX, true);
  // 0.9 * 140 = 126 GiB allowed; 1 + 87 + 0.25 + 8 + 0.75 = 97 GiB fixed: 29 GiB of 1 MiB blocks.
  EXPECT_EQ(p.kv_budget, 29 * kGiB);
  EXPECT_EQ(p.num_blocks, 29 * 1024);
  EXPECT_NE(p.source.find("90%"), std::string::npos) << p.source;
  EXPECT_NE(p.parts.find("weights 87.00 GiB"), std::string::npos) << p.parts;
  EXPECT_NE(p.parts.find("in use before start 1.00 GiB"), std::string::npos) << p.parts;
}

TEST(MemoryPlan, AModelThatDoesNotFitNamesEveryPartAndTheWayOut) {
  const std::string e = error_of(h200(), demand(130), 0.9, 0);
  EXPECT_NE(e.find("--gpu-memory-utilization 0.9 allows 126.00 GiB"), std::string::npos) << e;
  EXPECT_NE(e.find("NVIDIA H200"), std::string::npos) << e;
  EXPECT_NE(e.find("weights 130.00 GiB"), std::string::npos) << e;
  EXPECT_NE(e.find("workspace 8.00 GiB"), std::string::npos) << e;
  EXPECT_NE(e.find("a smaller --num-layers fits"), std::string::npos) << e;
}

TEST(MemoryPlan, AnExplicitBudgetIsTakenWhenItFitsAndRefusedWhenItDoesNot) {
  const PoolPlan p = plan_kv_pool(h200(), demand(4), 0.9, 2 * kGiB, 16, INT_MAX, false);
  EXPECT_EQ(p.kv_budget, 2 * kGiB);
  EXPECT_EQ(p.num_blocks, 2048);
  EXPECT_EQ(p.source, "--kv-cache-memory-bytes");
  const std::string e = error_of(h200(), demand(4), 0.9, 200 * kGiB);
  EXPECT_NE(e.find("--kv-cache-memory-bytes 200.00 GiB does not fit"), std::string::npos) << e;
}

TEST(MemoryPlan, ABudgetBelowOneBlockIsRefusedAndTheBlockCountIsCapped) {
  MemoryDemand d = demand(4);
  d.per_block = 4 * kGiB;
  const std::string e = error_of(h200(), d, 0.9, 3 * kGiB);
  EXPECT_NE(e.find("holds no block of 16 tokens"), std::string::npos) << e;
  const PoolPlan capped = plan_kv_pool(h200(), demand(4), 0.9, 0, 16, 100, false);
  EXPECT_EQ(capped.num_blocks, 100);
}

}  // namespace
}  // namespace sparkglm
