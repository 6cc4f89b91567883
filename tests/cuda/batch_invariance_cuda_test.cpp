// Batch invariance of the CUDA runner through the scheduler, once per per-layer geometry the
// kernels serve (served_models.h: tinyglm's production shapes and the trained tinyglm-micro):
// prompts of very different lengths, one-row prompt pieces and rows past the dense
// attention window (2051 tokens) included, alone and then mixed at C8 under a smaller prefill
// budget with staggered arrivals, so that prefill pieces and decode rows share steps in changing
// compositions. Token ids, logprobs and top logprobs must be equal bit for bit
// (tests/support/invariance_mix.h).
#include <gtest/gtest.h>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "tests/cuda/cuda_test_support.h"
#include "tests/cuda/served_models.h"
#include "tests/support/invariance_mix.h"

namespace sparkglm {
namespace {

class CudaBatchInvarianceOn : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaBatchInvarianceOn, RequestsAloneEqualRequestsMixedBitwise) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig c = cuda_test::served_config(GetParam());
  cuda::CudaRunnerOptions o;
  o.num_blocks = 8 * 160;
  o.block_size = 16;
  o.num_state_slots = 8;
  o.max_rows = 1024 + 8;
  o.max_seq_len = 2560;
  cuda::CudaModelRunner gpu(c, cuda_test::served_device_weights(GetParam(), c), o);
  invariance::Mix mix;
  mix.vocab_mod = 256;  // the byte tokenizer's ids (tinyglm's vocabulary is 320)
  // 65, 129 and 2113 leave one-row pieces when cut at 64; 2113 and 2300 pass the dense window
  // (tinyglm-micro's window is 19 tokens: every prompt past it has sparse rows).
  mix.prompt_lengths = {1, 65, 2300, 7, 129, 700, 2113, 40};
  invariance::check(gpu, invariance::limits(1024, 2560), invariance::limits(256, 2560), mix, 3);
  mix.logprobs = false;  // pipelined greedy steps with device picks: token ids only
  invariance::check(gpu, invariance::limits(1024, 2560), invariance::limits(384, 2560), mix, 2);
}

INSTANTIATE_TEST_SUITE_P(ServedModels, CudaBatchInvarianceOn,
                         ::testing::ValuesIn(cuda_test::served_models()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           return cuda_test::model_test_name(i.param);
                         });

}  // namespace
}  // namespace sparkglm
