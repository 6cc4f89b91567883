// Prefix-cache restores on the CUDA runner (tinyglm, production per-layer shapes): KDA snapshots
// saved and restored by device copies beside the state slots, shared latent blocks in bf16 and
// fp8_g128, a conversation past the dense attention window (2051 tokens) included. Every warm
// answer equals the cold prefill's, token ids, logprobs and top logprobs bit for bit
// (tests/support/prefix_scenario.h); then the same with pipelined device picks.
#include <gtest/gtest.h>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "tests/cuda/cuda_test_support.h"
#include "tests/support/prefix_scenario.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

TEST(CudaPrefixCache, RestoredPrefixEqualsColdPrefillBitwise) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig c = preset_config("tinyglm");
  for (KvDtype dtype : {KvDtype::kBF16, KvDtype::kFp8G128}) {
    cuda::CudaRunnerOptions o;
    o.num_blocks = 4 * 200;
    o.block_size = 16;
    o.num_state_slots = 4;
    o.num_snapshots = 8;
    o.max_rows = 1024 + 4;
    o.max_seq_len = 3072;
    o.kv_dtype = dtype;
    cuda::CudaModelRunner gpu(c, cuda::DeviceWeights::generate(c, kDefaultDummySeed), o);
    SchedulerLimits l;
    l.max_num_seqs = 4;
    l.max_batch_size = 4;
    l.max_prefill_tokens = 1024;
    l.max_seq_len = 3072;
    l.prefix_caching = true;
    l.cache_identity = PrefixCache::identity("tinyglm", to_string(dtype));
    SCOPED_TRACE(to_string(dtype));
    for (bool logprobs : {true, false}) {
      prefix_scenario::multi_turn_equals_cold(gpu, l, 700, 90, logprobs, 256);
      prefix_scenario::multi_turn_equals_cold(gpu, l, 2100, 40, logprobs, 256);
    }
  }
}

}  // namespace
}  // namespace sparkglm
