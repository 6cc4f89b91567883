// Batch invariance on the CPU reference through the scheduler (tests/support/invariance_mix.h):
// prompts of very different lengths (one-row pieces and the sparse indexer included) alone, then
// together at a smaller prefill budget with staggered arrivals, give every request the same token
// ids and logprobs bit for bit.
#include <gtest/gtest.h>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "tests/support/invariance_mix.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

TEST(BatchInvariance, CpuRequestsAloneEqualRequestsMixedBitwise) {
  ThreadPool pool(2);
  const auto& m = testing::micro_model();
  cpu::CpuModelRunner runner(m.config, m.weights, {8 * 64, 16, 8}, pool);
  invariance::Mix mix;
  // 65 and 129 leave one-row pieces when cut at 64; 200 and 330 reach the sparse indexer.
  mix.prompt_lengths = {1, 65, 7, 129, 200, 2, 330, 90};
  invariance::check(runner, invariance::limits(512, 1024), invariance::limits(64, 1024), mix, 3);
  mix.logprobs = false;  // pipelined greedy steps: token ids only
  mix.max_tokens = 8;
  invariance::check(runner, invariance::limits(512, 1024), invariance::limits(128, 1024), mix, 2);
}

}  // namespace
}  // namespace sparkglm
