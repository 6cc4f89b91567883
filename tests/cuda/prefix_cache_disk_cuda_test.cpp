// The prefix cache's disk tier on the CUDA runner (tinyglm, production per-layer shapes): a
// block's and a snapshot's host copies carry every byte the runner keeps for them (a copy moved
// to another block or snapshot and read back is the same bytes), and a conversation pushed out of
// the device's pool to disk comes back restored and answers exactly as a cold prefill does: token
// ids, logprobs and top logprobs bit for bit (the CPU's PrefixCacheDiskTest, on the device).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/core/error.h"
#include "engine/runtime/prefix_cache.h"
#include "engine/runtime/scheduler.h"
#include "tests/cuda/cuda_test_support.h"
#include "tests/support/build_paths.h"
#include "tests/support/prefix_scenario.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

using namespace prefix_scenario;  // NOLINT: the scenario's vocabulary

class CudaPrefixCacheDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
    std::string templ = sparkglm::testing::binary_dir() + "/prefix-disk-cuda-test-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<cuda::CudaModelRunner> runner(int blocks, int snapshots) const {
    cuda::CudaRunnerOptions o;
    o.num_blocks = blocks;
    o.block_size = 16;
    o.num_state_slots = 4;
    o.num_snapshots = snapshots;
    o.max_rows = 512 + 4;
    o.max_seq_len = 1024;
    o.kv_dtype = KvDtype::kBF16;
    return std::make_unique<cuda::CudaModelRunner>(
        config_, cuda::DeviceWeights::generate(config_, kDefaultDummySeed), o);
  }
  SchedulerLimits limits(bool caching, bool disk) const {
    SchedulerLimits l;
    l.max_num_seqs = 4;
    l.max_batch_size = 4;
    l.max_seq_len = 1024;
    l.max_prefill_tokens = 512;
    l.prefix_caching = caching;
    l.cache_identity = PrefixCache::identity("tinyglm", "bf16");
    if (disk) {
      l.prefix_cache_dir = dir_;
      l.prefix_cache_bytes = uint64_t(256) << 20;
    }
    return l;
  }

  const ModelConfig config_ = preset_config("tinyglm");
  std::string dir_;
};

TEST_F(CudaPrefixCacheDisk, HostCopiesCarryEveryByteOfABlockAndASnapshot) {
  auto gpu = runner(64, 2);
  const int64_t layers = config_.num_mla_layers() + (config_.mtp_layer() >= 0 ? 1 : 0);
  const int64_t bs = 16, dim = config_.index_head_dim;
  const int64_t record = int64_t(cuda::latent_record_bytes(cuda::LatentFormat::kBF16));
  EXPECT_EQ(gpu->host_block_bytes(), size_t(layers * (bs * record + bs * dim * 4 + bs * 4 +
                                                      bs / cuda::kIndexKpool * dim * 4)));
  const int64_t H = config_.kda.num_heads, K = config_.kda.head_dim;
  EXPECT_EQ(gpu->host_snapshot_bytes(),
            size_t(config_.num_kda_layers() *
                   (H * K * K + 3 * (config_.kda.short_conv_kernel_size - 1) * H * K) * 4));

  // A prompt of 150 tokens through a caching scheduler writes blocks and a snapshot.
  Scheduler s(*gpu, limits(true, false));
  run(s, {request(tokens_of(150, 7), false)});

  // Which entries the run wrote is the allocator's choice: copy the one holding the most data
  // over the one holding the least, and read it back.
  auto round_trip = [&](size_t bytes, int entries, auto to_host, auto from_host) {
    std::vector<std::vector<std::byte>> all(static_cast<size_t>(entries),
                                            std::vector<std::byte>(bytes));
    int fullest = 0, emptiest = 0;
    std::vector<size_t> nonzero(static_cast<size_t>(entries), 0);
    for (int i = 0; i < entries; ++i) {
      to_host(i, all[size_t(i)].data());
      for (std::byte x : all[size_t(i)]) nonzero[size_t(i)] += x != std::byte{0};
      if (nonzero[size_t(i)] > nonzero[size_t(fullest)]) fullest = i;
      if (nonzero[size_t(i)] < nonzero[size_t(emptiest)]) emptiest = i;
    }
    ASSERT_GT(nonzero[size_t(fullest)], bytes / 4) << "the run wrote an entry";
    ASSERT_NE(fullest, emptiest);
    from_host(emptiest, all[size_t(fullest)].data());
    std::vector<std::byte> back(bytes, std::byte{0x5a});
    to_host(emptiest, back.data());
    EXPECT_EQ(back, all[size_t(fullest)]);
  };
  round_trip(
      gpu->host_block_bytes(), 64, [&](int i, std::byte* h) { gpu->copy_block_to_host(i, h); },
      [&](int i, const std::byte* h) { gpu->copy_block_from_host(i, h); });
  round_trip(
      gpu->host_snapshot_bytes(), 2, [&](int i, std::byte* h) { gpu->copy_snapshot_to_host(i, h); },
      [&](int i, const std::byte* h) { gpu->copy_snapshot_from_host(i, h); });

  std::vector<std::byte> scratch(gpu->host_block_bytes());
  try {
    gpu->copy_block_to_host(64, scratch.data());
    ADD_FAILURE() << "a block outside the pool was copied";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

TEST_F(CudaPrefixCacheDisk, AConversationEvictedToDiskComesBackEqualToCold) {
  const GenerationRequest a = request(tokens_of(150, 40), true);
  const GenerationRequest b = request(tokens_of(370, 41), true);
  Outcome cold_a;
  {
    auto cold_runner = runner(64, 1);
    Scheduler cold(*cold_runner, limits(false, false));
    cold_a = run(cold, {a})[0];
  }
  // 24 blocks (384 tokens) and 2 snapshots: b (370 + 6 tokens) needs all 24, so every block of a
  // goes out, and a's snapshot goes with its last block.
  auto gpu = runner(24, 2);
  Scheduler s(*gpu, limits(true, true));
  ASSERT_TRUE(s.prefix_cache()->disk_tier());
  const Outcome first = run(s, {a})[0];
  EXPECT_EQ(first.cached_tokens, 0);
  expect_bitwise(cold_a, first, "a, first");
  run(s, {b});
  const PrefixCacheCounters after_b = s.counters().prefix;
  EXPECT_GE(after_b.spilled_blocks, 8u) << "a's 8 prompt blocks went to disk";
  EXPECT_GE(after_b.spilled_snapshots, 1u) << "a's snapshot at 128 went to disk";

  const Outcome back = run(s, {a})[0];
  const PrefixCacheCounters c = s.counters().prefix;
  EXPECT_EQ(back.cached_tokens, 128) << "the hit is a's prompt end, restored from disk";
  EXPECT_EQ(c.restored_blocks, 8u);
  EXPECT_EQ(c.restored_snapshots, 1u);
  EXPECT_EQ(c.disk_errors, 0u);
  expect_bitwise(cold_a, back, "a restored from disk");
}

}  // namespace
}  // namespace sparkglm
