// build_runner, the one place a device name becomes a ModelRunner: the CPU path sizes its pool
// from the budget and says so; bad device names and budgets are refused by name; --device cuda
// without a CUDA build or without a visible GPU is refused, never half-built.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "engine/backend/runner_factory.h"
#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/dist/socket_communicator.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm {
namespace {

RunnerRequest micro() {
  RunnerRequest r;
  r.preset = "tinyglm-micro";
  r.seed = 7;
  r.block_size = 16;
  r.max_num_seqs = 3;
  r.max_seq_len = 512;
  r.kv_dtype = KvDtype::kBF16;
  return r;
}

std::string error_of(const RunnerRequest& r, ErrorKind kind) {
  try {
    build_runner(r, default_thread_pool());
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  return "";
}

TEST(RunnerFactory, TheCpuPoolHoldsMaxNumSeqsFullSequencesAndTheLogSaysSo) {
  const BuiltRunner b = build_runner(micro(), default_thread_pool());
  ASSERT_NE(b.runner, nullptr);
  const CacheGeometry g = b.runner->cache_geometry();
  EXPECT_EQ(g.block_size, 16);
  EXPECT_EQ(g.num_state_slots, 3);
  EXPECT_EQ(g.num_blocks, 3 * (512 / 16 + 1));  // max_num_seqs sequences of max_seq_len
  EXPECT_EQ(b.pool_tokens, g.num_blocks * 16);
  EXPECT_EQ(b.max_seq_len, 512);
  EXPECT_EQ(b.model_id, "tinyglm-micro");
  EXPECT_EQ(b.weights_identity, "dummy:seed=7");
  ASSERT_FALSE(b.log_lines.empty());
  EXPECT_NE(b.log_lines.back().find("KV pool: " + std::to_string(g.num_blocks) + " blocks"),
            std::string::npos)
      << b.log_lines.back();
}

TEST(RunnerFactory, AnExplicitBudgetSizesThePoolAndOneBelowABlockIsRefused) {
  RunnerRequest r = micro();
  const size_t block =
      LatentCache::bytes_per_block(preset_config("tinyglm-micro"), 16, KvDtype::kBF16);
  r.kv_cache_bytes = 5 * block;
  EXPECT_EQ(build_runner(r, default_thread_pool()).runner->cache_geometry().num_blocks, 5);
  r.kv_cache_bytes = block - 1;
  EXPECT_NE(error_of(r, ErrorKind::kInvalidArgument).find("holds no KV block of 16 tokens"),
            std::string::npos);
}

// With two ranks the same budget holds more blocks: 388 bytes a token a cache layer (f32 latent
// 256, key 128, gate 4; the MLA layer and the MTP layer) become 128 + 132 = 260 on each rank,
// 1.49x at tinyglm-micro's shape (1.66x at glm-5.3-flash's, latent_cache_test). Building a rank
// runs no collective.
TEST(RunnerFactory, TheKvShardMultipliesTheCpuPoolsTokensAndTheLogSaysSo) {
  auto group = dist::SocketCommunicator::local_group(2);
  RunnerRequest r = micro();
  r.kv_dtype = KvDtype::kF32;
  const ModelConfig c = preset_config("tinyglm-micro");
  r.kv_cache_bytes = 300 * LatentCache::bytes_per_block(c, 16, KvDtype::kF32);
  const int whole = build_runner(r, default_thread_pool()).pool_tokens;
  EXPECT_EQ(whole, 300 * 16);
  r.comm = group[0].get();
  const BuiltRunner shard = build_runner(r, default_thread_pool());
  EXPECT_EQ(shard.pool_tokens,
            LatentCache::blocks_for_budget(c, 16, KvDtype::kF32, r.kv_cache_bytes, 2) * 16);
  EXPECT_EQ(shard.pool_tokens, 300 * 388 / 260 * 16);
  std::printf("TP2 KV pool: %d tokens with the KV shard, %d without (%.2fx)\n", shard.pool_tokens,
              whole, double(shard.pool_tokens) / whole);
  const std::string log = shard.log_lines.back();
  EXPECT_NE(log.find("520 bytes a token on each rank instead of 776, 1.49x"), std::string::npos)
      << log;
  r.kv_shard = false;
  EXPECT_EQ(build_runner(r, default_thread_pool()).pool_tokens, whole);
}

TEST(RunnerFactory, StepProfilingOnTheCpuIsRefusedNotIgnored) {
  RunnerRequest r = micro();
  r.profile_steps = true;
  EXPECT_NE(error_of(r, ErrorKind::kUnsupported)
                .find("--profile-steps: the CPU backend has no step profiler"),
            std::string::npos);
}

TEST(RunnerFactory, UnknownDevicesAndUnservableCudaRequestsAreRefused) {
  RunnerRequest r = micro();
  r.device = "tpu";
  EXPECT_NE(error_of(r, ErrorKind::kInvalidArgument).find("--device tpu: expected cpu or cuda"),
            std::string::npos);
  r.device = "cuda";
  // A build without CUDA, a machine without a GPU, or a GPU and micro's shapes: each is a clear
  // refusal before anything is allocated.
  std::string e;
  try {
    build_runner(r, default_thread_pool());
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_TRUE(e.find("without the CUDA backend") != std::string::npos ||
              e.find("no CUDA device is visible") != std::string::npos ||
              e.find("needs hidden_size") != std::string::npos)
      << e;
}

}  // namespace
}  // namespace sparkglm
