// Tensor and expert parallelism on the CPU backend, ranks as threads of one process joined by
// socket pairs: TP2 and TP4, with the KV shard and without, at f32 and fp8_g128 latents, against
// TP1 on tinyglm-micro (logits within a stated NMSE, greedy tokens equal), repeatable bit for bit
// and batch invariant (a sequence alone and among three others), a KV shard's rank holding the
// latents of its positions only, and a refused size naming the dimension that does not divide.
//
// Sequence 0's prompt is 67 tokens and it decodes past position 64 (= index_topk * index_kpool;
// rows from position 19 on see more than index_topk / index_kpool pools), so the indexer's
// selection runs in prefill and decode rows, and the sharded attention combines ranks' parts of
// selected sets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/dist/socket_communicator.h"
#include "engine/runtime/block_allocator.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

// Row-parallel sums add in another order than one rank's, so logits differ by rounding only: at
// tinyglm-micro's depth the NMSE is about 1e-13 (see the test's output); a wrong shard is ~1.
constexpr double kMaxNmse = 1e-9;

struct RunOutput {
  std::vector<float> prefill_logits;         // [sequences, vocab]: the last prompt row of each
  std::vector<std::vector<int32_t>> tokens;  // [sequences][decode steps]: greedy picks
};

// Prompt lengths by sequence: sequence 0 is past the indexer's dense prefix from its 20th token.
constexpr int kPromptLengths[] = {67, 9, 30, 14};

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 37 + salt * 11 + 3) % 256;
  return t;
}

// Prefills `sequences` prompts in one step (forward, whole logits), then decodes `steps` tokens
// for each through submit / collect with greedy picks fed back by token_from.
RunOutput run_rank(ModelRunner& runner, int sequences, int steps) {
  const ModelConfig& c = runner.config();
  BlockAllocator blocks(64);
  std::vector<std::vector<int32_t>> tables(size_t(sequences), std::vector<int32_t>{});
  std::vector<int> pos(static_cast<size_t>(sequences));
  ForwardBatch prefill;
  for (int s = 0; s < sequences; ++s) {
    const std::vector<int32_t> p = prompt(kPromptLengths[s], s);
    blocks.ensure_capacity(tables[size_t(s)], int(p.size()) + steps, 16);
    prefill.add_sequence(p, 0, s, tables[size_t(s)]);
    pos[size_t(s)] = int(p.size());
  }
  RunOutput r;
  ForwardOutput out;
  runner.forward(prefill, out);
  r.prefill_logits = out.logits;
  std::vector<int32_t> next(static_cast<size_t>(sequences));
  for (int s = 0; s < sequences; ++s)
    next[size_t(s)] = greedy_token(&out.logits[size_t(s) * size_t(c.vocab_size)], c.vocab_size);
  r.tokens.assign(size_t(sequences), {});
  for (int k = 0; k < steps; ++k) {
    ForwardBatch batch;
    StepSampling sampling;
    for (int s = 0; s < sequences; ++s) {
      batch.add_sequence({next[size_t(s)]}, pos[size_t(s)]++, s, tables[size_t(s)]);
      sampling.picked.push_back(1);
      sampling.draws.push_back({});
    }
    runner.submit(batch, sampling);
    StepResult result;
    runner.collect(result);
    for (int s = 0; s < sequences; ++s) {
      r.tokens[size_t(s)].push_back(result.tokens[size_t(s)]);
      next[size_t(s)] = result.tokens[size_t(s)];
    }
  }
  return r;
}

// How the ranks run: their number, whether the latents are sharded, and the latents' dtype.
struct RankSetup {
  int world = 1;
  bool kv_shard = true;
  KvDtype kv_dtype = KvDtype::kF32;
};

std::string name(const RankSetup& s) {
  return "TP" + std::to_string(s.world) + (s.kv_shard ? " KV shard" : " replicated KV") + " " +
         to_string(s.kv_dtype);
}

// Runs `setup.world` ranks as threads, each with its own runner and one-thread pool; returns rank
// 0's output (every rank's tokens must agree). `inspect` sees each rank's runner after its run.
RunOutput run_parallel(const RankSetup& setup, int sequences, int steps,
                       const std::function<void(int, cpu::CpuModelRunner&)>& inspect = nullptr) {
  const LoadedModel& m = testing::micro_model();
  auto group = dist::SocketCommunicator::local_group(setup.world);
  std::vector<RunOutput> outputs(static_cast<size_t>(setup.world));
  std::vector<std::thread> threads;
  for (int r = 0; r < setup.world; ++r)
    threads.emplace_back([&, r] {
      ThreadPool pool(1);
      cpu::CpuRunnerOptions o;
      o.num_blocks = 64;
      o.num_state_slots = 4;
      o.kv_dtype = setup.kv_dtype;
      o.kv_shard = setup.kv_shard;
      o.comm = setup.world > 1 ? group[size_t(r)].get() : nullptr;
      cpu::CpuModelRunner runner(m.config, m.weights, o, pool);
      outputs[size_t(r)] = run_rank(runner, sequences, steps);
      if (inspect) inspect(r, runner);
    });
  for (auto& t : threads) t.join();
  for (int r = 1; r < setup.world; ++r)
    EXPECT_EQ(outputs[size_t(r)].tokens, outputs[0].tokens) << name(setup) << " rank " << r;
  return outputs[0];
}

double nmse(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return num / den;
}

TEST(TensorParallel, Tp2AndTp4MatchOneRankWithinTheNmseAndPickTheSameGreedyTokens) {
  for (const KvDtype dtype : {KvDtype::kF32, KvDtype::kFp8G128}) {
    const RunOutput one = run_parallel({1, false, dtype}, 3, 12);
    for (const int world : {2, 4})
      for (const bool kv_shard : {true, false}) {
        const RankSetup setup{world, kv_shard, dtype};
        const RunOutput tp = run_parallel(setup, 3, 12);
        ASSERT_EQ(tp.prefill_logits.size(), one.prefill_logits.size());
        const double e = nmse(tp.prefill_logits, one.prefill_logits);
        std::printf("%s prefill logits NMSE vs TP1: %.3g\n", name(setup).c_str(), e);
        EXPECT_LT(e, kMaxNmse) << name(setup);
        EXPECT_EQ(tp.tokens, one.tokens) << name(setup);
      }
  }
}

TEST(TensorParallel, Tp2AndTp4RepeatBitForBit) {
  for (const RankSetup setup : {RankSetup{2, true}, RankSetup{4, true}, RankSetup{2, false}}) {
    const RunOutput a = run_parallel(setup, 2, 8), b = run_parallel(setup, 2, 8);
    EXPECT_EQ(a.prefill_logits, b.prefill_logits) << name(setup);
    EXPECT_EQ(a.tokens, b.tokens) << name(setup);
  }
}

TEST(TensorParallel, ASequenceAloneEqualsItAmongThreeOthers) {
  const int64_t v = testing::micro_model().config.vocab_size;
  for (const RankSetup setup : {RankSetup{2, true}, RankSetup{4, true}, RankSetup{2, false}}) {
    const RunOutput alone = run_parallel(setup, 1, 10), four = run_parallel(setup, 4, 10);
    EXPECT_EQ(alone.prefill_logits,
              std::vector<float>(four.prefill_logits.begin(), four.prefill_logits.begin() + v))
        << name(setup);
    EXPECT_EQ(alone.tokens[0], four.tokens[0]) << name(setup);
  }
}

// Each rank's cache has room for block_size / N latents a block and holds exactly the latents of
// its positions: they match TP1's (rounding apart: the layer's input went through all-reduces),
// and the union over the ranks is every position of every sequence.
TEST(TensorParallel, AKvShardRankHoldsTheLatentsOfItsOwnPositionsOnly) {
  const ModelConfig& c = testing::micro_model().config;
  constexpr int kSequences = 3, kSteps = 4, kLayer = 0;  // the first MLA layer's cache
  // The block tables run_rank builds: sequences take consecutive blocks from a fresh allocator.
  std::vector<std::vector<int32_t>> tables;
  std::vector<int64_t> lengths;
  BlockAllocator blocks(64);
  for (int s = 0; s < kSequences; ++s) {
    tables.emplace_back();
    blocks.ensure_capacity(tables.back(), kPromptLengths[s] + kSteps, 16);
    lengths.push_back(kPromptLengths[s] + kSteps);  // prompt, then one position a decode step
  }
  std::vector<std::vector<float>> whole;  // [sequence][position * R]: TP1's latents
  run_parallel({1, false}, kSequences, kSteps, [&](int, cpu::CpuModelRunner& runner) {
    for (int s = 0; s < kSequences; ++s) {
      whole.emplace_back(size_t(lengths[size_t(s)] * c.kv_lora_rank));
      for (int64_t p = 0; p < lengths[size_t(s)]; ++p)
        runner.latent_cache().load_latent(kLayer, tables[size_t(s)], p,
                                          &whole.back()[size_t(p * c.kv_lora_rank)]);
    }
  });
  for (const int world : {2, 4}) {
    std::vector<int64_t> held(static_cast<size_t>(kSequences), 0);  // positions some rank holds
    std::mutex held_mutex;
    run_parallel({world, true}, kSequences, kSteps, [&](int rank, cpu::CpuModelRunner& runner) {
      const LatentCache& cache = runner.latent_cache();
      EXPECT_EQ(cache.block_bytes(), LatentCache::bytes_per_block(c, 16, KvDtype::kF32, world));
      std::vector<float> latent(static_cast<size_t>(c.kv_lora_rank));  // [R]
      for (int s = 0; s < kSequences; ++s)
        for (int64_t p = 0; p < lengths[size_t(s)]; ++p) {
          ASSERT_EQ(cache.owns(p), p % world == rank) << p;
          if (!cache.owns(p)) continue;
          cache.load_latent(kLayer, tables[size_t(s)], p, latent.data());
          const float* ref = &whole[size_t(s)][size_t(p * c.kv_lora_rank)];
          double err = 0, norm = 0;
          for (int e = 0; e < c.kv_lora_rank; ++e) {
            err += (double(latent[size_t(e)]) - ref[e]) * (double(latent[size_t(e)]) - ref[e]);
            norm += double(ref[e]) * ref[e];
          }
          EXPECT_LT(err, kMaxNmse * norm) << "TP" << world << " rank " << rank << " position " << p;
          const std::lock_guard<std::mutex> lock(held_mutex);
          ++held[size_t(s)];
        }
    });
    for (int s = 0; s < kSequences; ++s) EXPECT_EQ(held[size_t(s)], lengths[size_t(s)]) << world;
  }
}

TEST(TensorParallel, ASizeThatDoesNotDivideIsRefusedNamingTheDimension) {
  const ModelConfig& c = testing::micro_model().config;
  try {
    cpu::check_shardable(c, 3);
    FAIL() << "TP3 of tinyglm-micro was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("linear_attn_config.num_heads = 4"), std::string::npos)
        << e.what();
  }
  ModelConfig odd = c;
  odd.n_routed_experts = 6;
  EXPECT_THROW(cpu::check_shardable(odd, 4), Error);
  for (const char* preset : {"tinyglm", "glm-5.3-flash"})
    for (int world : {2, 4, 8}) EXPECT_NO_THROW(cpu::check_shardable(preset_config(preset), world));
}

}  // namespace
}  // namespace sparkglm
