// The prefix cache's disk tier through the scheduler on the CPU reference (tinyglm-micro): a
// conversation pushed out of the resident cache (its blocks and its KDA snapshot spilled to disk)
// comes back restored from disk, and what it computes equals a cold prefill bit for bit: the
// token ids, the logprobs and every logit row. A salt still separates on disk.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/runtime/prefix_cache.h"
#include "engine/runtime/scheduler.h"
#include "tests/support/build_paths.h"
#include "tests/support/micro_model.h"
#include "tests/support/prefix_scenario.h"

namespace sparkglm {
namespace {

using namespace prefix_scenario;  // NOLINT: the scenario's vocabulary

// Keeps every logit row the scheduler collects, in order (the runner underneath does the work).
class LogitRecorder : public ModelRunner {
 public:
  explicit LogitRecorder(ModelRunner& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  CacheGeometry cache_geometry() const override { return inner_.cache_geometry(); }
  void forward(const ForwardBatch& batch, ForwardOutput& out) override {
    inner_.forward(batch, out);
  }
  void forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                   ForwardOutput& out) override {
    inner_.forward_mtp(batch, hidden, out);
  }
  void submit(const ForwardBatch& batch, const StepSampling& sampling) override {
    inner_.submit(batch, sampling);
  }
  void collect(StepResult& result) override {
    inner_.collect(result);
    logits.insert(logits.end(), result.logits.begin(), result.logits.end());
  }
  size_t host_block_bytes() const override { return inner_.host_block_bytes(); }
  size_t host_snapshot_bytes() const override { return inner_.host_snapshot_bytes(); }
  void copy_block_to_host(int32_t b, std::byte* host) override {
    inner_.copy_block_to_host(b, host);
  }
  void copy_block_from_host(int32_t b, const std::byte* host) override {
    inner_.copy_block_from_host(b, host);
  }
  void copy_snapshot_to_host(int s, std::byte* host) override {
    inner_.copy_snapshot_to_host(s, host);
  }
  void copy_snapshot_from_host(int s, const std::byte* host) override {
    inner_.copy_snapshot_from_host(s, host);
  }
  std::vector<float> logits;

 private:
  ModelRunner& inner_;
};

class PrefixCacheDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = sparkglm::testing::binary_dir() + "/prefix-disk-test-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<cpu::CpuModelRunner> runner(int blocks, int snapshots) {
    cpu::CpuRunnerOptions o;
    o.num_blocks = blocks;
    o.block_size = 16;
    o.num_state_slots = 4;
    o.num_snapshots = snapshots;
    o.kv_dtype = KvDtype::kBF16;
    return std::make_unique<cpu::CpuModelRunner>(m.config, m.weights, o, pool);
  }
  SchedulerLimits limits(bool disk) const {
    SchedulerLimits l;
    l.max_seq_len = 1024;
    l.max_prefill_tokens = 512;
    l.prefix_caching = true;
    l.cache_identity = PrefixCache::identity("tinyglm-micro", "bf16");
    if (disk) {
      l.prefix_cache_dir = dir_;
      l.prefix_cache_bytes = uint64_t(64) << 20;
    }
    return l;
  }
  // One request alone on `s`, with the logit rows it produced.
  static std::pair<Outcome, std::vector<float>> alone(Scheduler& s, LogitRecorder& rec,
                                                      const GenerationRequest& r) {
    rec.logits.clear();
    Outcome o = run(s, {r})[0];
    return {o, rec.logits};
  }
  static void expect_same_logits(const std::vector<float>& cold, const std::vector<float>& warm,
                                 const std::string& what) {
    ASSERT_EQ(cold.size(), warm.size()) << what;
    EXPECT_EQ(0, std::memcmp(cold.data(), warm.data(), cold.size() * sizeof(float)))
        << what << ": a logit differs from the cold prefill's";
  }

  ThreadPool pool{2};
  const LoadedModel& m = testing::micro_model();
  std::string dir_;
};

TEST_F(PrefixCacheDiskTest, AConversationEvictedToDiskComesBackEqualToCold) {
  const GenerationRequest a = request(tokens_of(150, 40), true);
  const GenerationRequest b = request(tokens_of(370, 41), true);
  // Cold references on a runner of their own.
  auto cold_runner = runner(64, 1);
  LogitRecorder cold_rec(*cold_runner);
  SchedulerLimits cold_limits = limits(false);
  cold_limits.prefix_caching = false;
  Scheduler cold(cold_rec, cold_limits);
  const auto [cold_a, cold_a_logits] = alone(cold, cold_rec, a);

  // 24 blocks (384 tokens) and 2 snapshots: b (370 + 6 tokens) needs all 24, so every block of a
  // goes out, and a's snapshot goes with its last block.
  auto r = runner(24, 2);
  LogitRecorder rec(*r);
  Scheduler s(rec, limits(true));
  ASSERT_TRUE(s.prefix_cache()->disk_tier());
  const auto [first, first_logits] = alone(s, rec, a);
  EXPECT_EQ(first.cached_tokens, 0);
  expect_bitwise(cold_a, first, "a, first");
  run(s, {b});
  const PrefixCacheCounters after_b = s.counters().prefix;
  EXPECT_GE(after_b.spilled_blocks, 8u) << "a's 8 prompt blocks went to disk";
  EXPECT_GE(after_b.spilled_snapshots, 1u) << "a's snapshot at 128 went to disk";
  EXPECT_EQ(after_b.restored_blocks, 0u);

  const auto [back, back_logits] = alone(s, rec, a);
  const PrefixCacheCounters c = s.counters().prefix;
  EXPECT_EQ(back.cached_tokens, 128) << "the hit is a's prompt end, restored from disk";
  EXPECT_EQ(c.restored_blocks, 8u);
  EXPECT_EQ(c.restored_snapshots, 1u);
  EXPECT_GT(c.restore_bytes, 0u);
  EXPECT_EQ(c.disk_errors, 0u);
  expect_bitwise(cold_a, back, "a restored from disk");
  expect_same_logits(cold_a_logits, back_logits, "a restored from disk");

  // Once more: its blocks are resident again (republished by the restore): a plain hit.
  const auto [again, again_logits] = alone(s, rec, a);
  EXPECT_EQ(again.cached_tokens, 128);
  EXPECT_EQ(s.counters().prefix.restored_blocks, 8u);
  expect_same_logits(cold_a_logits, again_logits, "a resident again");
}

TEST_F(PrefixCacheDiskTest, ASaltNeverMatchesAnotherSaltsRecordsOnDisk) {
  auto r = runner(24, 2);
  Scheduler s(*r, limits(true));
  const auto prompt = tokens_of(150, 42);
  run(s, {request(prompt, true, "tenant-a")});
  run(s, {request(tokens_of(370, 43), true)});  // a's records go to disk
  ASSERT_GE(s.counters().prefix.spilled_blocks, 8u);
  EXPECT_EQ(run(s, {request(prompt, true, "tenant-b")})[0].cached_tokens, 0);
  EXPECT_EQ(s.counters().prefix.restored_blocks, 0u);
}

TEST_F(PrefixCacheDiskTest, WithoutTheDiskTierAnEvictedConversationStartsCold) {
  auto r = runner(24, 2);
  Scheduler s(*r, limits(false));
  EXPECT_FALSE(s.prefix_cache()->disk_tier());
  const GenerationRequest a = request(tokens_of(150, 40), true);
  run(s, {a});
  run(s, {request(tokens_of(370, 41), true)});
  EXPECT_EQ(run(s, {a})[0].cached_tokens, 0);
  EXPECT_EQ(s.counters().prefix.spilled_blocks, 0u);
}

}  // namespace
}  // namespace sparkglm
