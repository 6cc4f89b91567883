#include "engine/backend/cpu/mla_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "tests/backend/mla_fp64_reference.h"

namespace sparkglm {
namespace {

using testing::mla_reference_fp64;
using testing::MlaReference;
using testing::RandomMlaWeights;

// FP32 against FP64 with reductions of at most a few hundred terms, two norms and a softmax: the
// engine's error is ~1e-6 of the output's scale. 3e-5 leaves room for unlucky rounding while a
// wrong head slice, scale, selection or missing token moves the output by 1e-2 or more.
constexpr double kRelTolerance = 3e-5;
constexpr int kBlockSize = 8;  // small, so that micro sequences span many blocks

ModelConfig micro() {
  return preset_config("tinyglm-micro");
}

// Micro with every MLA width changed and made uneven: dn != dv catches swapped head slices, and
// widths that are not multiples of 8 or 32 and 3 heads exercise every remainder path (a latent
// of 172 = 128 + 32 + 12 reaches each lane blocking of the weighted sums).
ModelConfig uneven_micro() {
  ModelConfig c = micro();
  c.num_attention_heads = 3;
  c.qk_nope_head_dim = 20;
  c.v_head_dim = 28;
  c.kv_lora_rank = 172;
  c.q_lora_rank = 36;
  c.index_n_heads = 3;
  c.index_head_dim = 12;
  return c;
}

std::vector<float> random_rows(int64_t n, int64_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(size_t(n * d));  // [n, d]
  for (float& e : x) e = dist(rng);
  return x;
}

// Block ids 0..count-1 in a fixed random order: non-contiguous and not monotone.
std::vector<int32_t> shuffled_blocks(int count, uint32_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(count));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  return ids;
}

// Runs one sequence through the layer in steps of the given sizes (a prefill, then chunks or
// decodes); x: [n, D] for positions 0..n-1. Returns [n, D].
std::vector<float> run_steps(const ModelConfig& c, const MlaWeights& w, LatentCache& cache,
                             int layer, const std::vector<int32_t>& table, const float* x,
                             const std::vector<int>& steps, ThreadPool& pool) {
  const int64_t D = c.hidden_size;
  const int n = std::accumulate(steps.begin(), steps.end(), 0);
  std::vector<float> out(size_t(n * D));  // [n, D]
  int start = 0;
  for (int m : steps) {
    ForwardBatch b;
    b.add_sequence(std::vector<int32_t>(size_t(m), 0), start, 0, table);
    b.validate(c, cache.block_size(), cache.num_blocks(), 1);
    cpu::mla_layer_forward(c, w, layer, b, cache, x + start * D, &out[size_t(start * D)], pool);
    start += m;
  }
  return out;
}

struct Deviation {
  double max_abs = 0.0, ref_scale = 0.0;  // max |out - ref| and max |ref| over the rows compared
  double rel() const { return max_abs / ref_scale; }
};

Deviation deviation(const std::vector<float>& out, const std::vector<double>& ref, int64_t D,
                    int64_t row0, int64_t row1) {
  Deviation d;
  for (int64_t i = row0 * D; i < row1 * D; ++i) {
    d.max_abs = std::max(d.max_abs, std::abs(double(out[size_t(i)]) - ref[size_t(i)]));
    d.ref_scale = std::max(d.ref_scale, std::abs(ref[size_t(i)]));
  }
  return d;
}

bool bitwise_equal(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Micro selects 4 pools of 4 tokens: a row is sparse once floor((t+1)/4) > 4, i.e. from t = 19.
constexpr int kFirstSparseRow = 19;

TEST(MlaLayer, MatchesFp64ReferenceBelowAndAboveSparseThreshold) {
  ThreadPool pool(2);
  for (const auto& [name, c, dtype] : {std::tuple{"micro f32", micro(), DType::kF32},
                                       std::tuple{"micro bf16", micro(), DType::kBF16},
                                       std::tuple{"uneven f32", uneven_micro(), DType::kF32}}) {
    ASSERT_EQ(c.index_topk_pools(), 4);
    RandomMlaWeights rw(c, dtype, 11);
    for (int n : {12, 48}) {
      const std::vector<float> x = random_rows(n, c.hidden_size, 100 + uint32_t(n));
      LatentCache cache(c, 16, kBlockSize);
      const auto out = run_steps(c, rw.w, cache, 0, shuffled_blocks(16, 5), x.data(), {n}, pool);
      const MlaReference ref = mla_reference_fp64(c, rw.w, x.data(), n, true);
      const Deviation d = deviation(out, ref.out, c.hidden_size, 0, n);
      std::printf(
          "[%s n=%d] sparse rows %d, min selection margin %.3g, max|err| %.3g, max|ref| %.3g, rel "
          "%.3g\n",
          name, n, ref.sparse_rows, ref.min_selection_margin, d.max_abs, d.ref_scale, d.rel());
      EXPECT_EQ(ref.sparse_rows, std::max(0, n - kFirstSparseRow));
      // A margin below 1e-4 would make the comparison depend on rounding, not on correctness.
      if (ref.sparse_rows > 0) {
        ASSERT_GT(ref.min_selection_margin, 1e-4);
      }
      EXPECT_LE(d.rel(), kRelTolerance);
    }
  }
}

TEST(MlaLayer, IsPlainCausalWhileFewPoolsAndStillWritesIndexerKeys) {
  const ModelConfig c = micro();
  ThreadPool pool(2);
  RandomMlaWeights rw(c, DType::kF32, 12);
  const int n = kFirstSparseRow;  // rows 0..18: at most 4 complete pools
  const std::vector<float> x = random_rows(n, c.hidden_size, 7);
  const auto table = shuffled_blocks(4, 9);
  LatentCache cache(c, 4, kBlockSize);
  const auto out = run_steps(c, rw.w, cache, 1, table, x.data(), {n}, pool);
  const MlaReference dense = mla_reference_fp64(c, rw.w, x.data(), n, false);
  const Deviation d = deviation(out, dense.out, c.hidden_size, 0, n);
  std::printf("dense rows 0..%d vs causal reference: max|err| %.3g, rel %.3g\n", n - 1, d.max_abs,
              d.rel());
  EXPECT_LE(d.rel(), kRelTolerance);

  // The indexer's query side is never consulted while dense: poisoning it changes nothing.
  MlaWeights poisoned = rw.w;
  std::vector<float> nan_wq(size_t(rw.w.indexer.wq_b.rows * rw.w.indexer.wq_b.cols), NAN);
  poisoned.indexer.wq_b.data = nan_wq.data();
  LatentCache cache2(c, 4, kBlockSize);
  const auto out2 = run_steps(c, poisoned, cache2, 1, table, x.data(), {n}, pool);
  EXPECT_TRUE(bitwise_equal(out.data(), out2.data(), out.size()));

  // Keys and gates are still cached for every position, ready for when pools start to count.
  double key_err = 0.0, gate_err = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const float* xj = x.data() + j * c.hidden_size;
    std::vector<double> xd(xj, xj + c.hidden_size);
    const auto key = testing::detail::layer_norm(
        testing::detail::matvec(rw.w.indexer.wk, 0, c.index_head_dim, xd.data()),
        rw.w.indexer.k_norm_weight, rw.w.indexer.k_norm_bias);
    std::vector<float> cached(static_cast<size_t>(c.index_head_dim));
    cache.load_index_key(1, table, j, cached.data());
    for (int64_t e = 0; e < c.index_head_dim; ++e)
      key_err = std::max(key_err, std::abs(double(cached[e]) - key[size_t(e)]));
    const double gate = testing::detail::matvec(rw.w.indexer.kpool_gate, 0, 1, xd.data())[0];
    gate_err = std::max(gate_err, std::abs(double(cache.index_gate_at(1, table, j)) - gate));
  }
  std::printf("cached indexer keys max|err| %.3g, gates max|err| %.3g\n", key_err, gate_err);
  EXPECT_LE(key_err, 1e-5);  // LayerNorm output is O(1); FP32 rounding is ~1e-7
  EXPECT_LE(gate_err, 1e-5);
}

TEST(MlaLayer, PrefillThenDecodeEqualsOnePrefillBitwise) {
  ThreadPool pool(2);
  for (const ModelConfig& c : {micro(), uneven_micro()}) {
    RandomMlaWeights rw(c, DType::kBF16, 13);
    const int n = 44;
    const std::vector<float> x = random_rows(n, c.hidden_size, 21);
    const auto table = shuffled_blocks(8, 3);
    LatentCache one(c, 8, kBlockSize);
    const auto whole = run_steps(c, rw.w, one, 0, table, x.data(), {n}, pool);
    // 13 prefill rows, then one decode per token (crossing the sparse threshold at t = 19).
    std::vector<int> decode_steps = {13};
    decode_steps.resize(size_t(n - 13 + 1), 1);
    LatentCache dec(c, 8, kBlockSize);
    const auto decoded = run_steps(c, rw.w, dec, 0, table, x.data(), decode_steps, pool);
    // Chunked prefill with chunk edges off the pool grid.
    LatentCache chunk(c, 8, kBlockSize);
    const auto chunked = run_steps(c, rw.w, chunk, 0, table, x.data(), {5, 17, 1, 21}, pool);
    int differing = 0;
    for (int t = 0; t < n; ++t) {
      const size_t o = size_t(t) * size_t(c.hidden_size), len = size_t(c.hidden_size);
      const bool same =
          bitwise_equal(&whole[o], &decoded[o], len) && bitwise_equal(&whole[o], &chunked[o], len);
      differing += same ? 0 : 1;
      EXPECT_TRUE(same) << "row " << t << " (heads " << c.num_attention_heads << ")";
    }
    std::printf("heads %d, latent %d: %d of %d rows differ bitwise\n", c.num_attention_heads,
                c.kv_lora_rank, differing, n);
  }
}

TEST(MlaLayer, RowsDoNotDependOnBatchOrThreadCount) {
  const ModelConfig c = micro();
  RandomMlaWeights rw(c, DType::kF32, 14);
  const int64_t D = c.hidden_size;
  // Four sequences (history, rows this step): a prefill chunk crossing the sparse threshold, a
  // sparse decode, a fresh prefill, a dense decode. Their blocks interleave in one shuffled pool.
  struct Seq {
    int history, rows;
  };
  const std::vector<Seq> seqs = {{14, 15}, {40, 1}, {0, 23}, {9, 1}};
  const std::vector<int32_t> ids = shuffled_blocks(32, 17);
  std::vector<std::vector<int32_t>> tables(4);
  for (int b = 0; b < 24; ++b) tables[size_t(b % 4)].push_back(ids[size_t(b)]);  // 6 blocks each
  std::vector<std::vector<float>> xs;
  for (int s = 0; s < 4; ++s)
    xs.push_back(random_rows(seqs[size_t(s)].history + seqs[size_t(s)].rows, D, 40 + uint32_t(s)));

  ThreadPool one_thread(1), two_threads(2);
  LatentCache history(c, 32, kBlockSize);
  for (int s = 0; s < 4; ++s)
    if (seqs[size_t(s)].history > 0)
      run_steps(c, rw.w, history, 1, tables[size_t(s)], xs[size_t(s)].data(),
                {seqs[size_t(s)].history}, one_thread);

  for (ThreadPool* pool : {&one_thread, &two_threads}) {
    ForwardBatch batch;
    std::vector<float> x_batch;  // [T, D]
    for (int s = 0; s < 4; ++s) {
      const Seq& q = seqs[size_t(s)];
      batch.add_sequence(std::vector<int32_t>(size_t(q.rows), 0), q.history, s, tables[size_t(s)]);
      x_batch.insert(x_batch.end(), xs[size_t(s)].begin() + q.history * D, xs[size_t(s)].end());
    }
    batch.validate(c, kBlockSize, 32, 4);
    LatentCache cache = history;
    std::vector<float> out(x_batch.size());  // [T, D]
    cpu::mla_layer_forward(c, rw.w, 1, batch, cache, x_batch.data(), out.data(), *pool);

    for (int s = 0; s < 4; ++s) {
      const Seq& q = seqs[size_t(s)];
      // The same step alone, single-threaded, on its own blocks; and one prefill of the whole
      // sequence on contiguous blocks of another cache layer.
      LatentCache alone(c, 32, kBlockSize);
      const std::vector<int> steps =
          q.history > 0 ? std::vector<int>{q.history, q.rows} : std::vector<int>{q.rows};
      std::vector<float> ref =
          run_steps(c, rw.w, alone, 1, tables[size_t(s)], xs[size_t(s)].data(), steps, one_thread);
      LatentCache fresh(c, 32, kBlockSize);
      std::vector<int32_t> contiguous(6);
      std::iota(contiguous.begin(), contiguous.end(), 0);
      std::vector<float> ref2 = run_steps(c, rw.w, fresh, 0, contiguous, xs[size_t(s)].data(),
                                          {q.history + q.rows}, one_thread);
      const float* got = &out[size_t(batch.seqs[size_t(s)].first_row) * size_t(D)];
      const size_t len = size_t(q.rows) * size_t(D);
      EXPECT_TRUE(bitwise_equal(got, &ref[size_t(q.history * D)], len))
          << "sequence " << s << " with " << pool->size() << " threads";
      EXPECT_TRUE(bitwise_equal(got, &ref2[size_t(q.history * D)], len))
          << "sequence " << s << " vs contiguous blocks, " << pool->size() << " threads";
    }
  }
}

TEST(MlaLayer, PooledSelectionChangesTheOutputOnceSparse) {
  const ModelConfig c = micro();
  ThreadPool pool(2);
  RandomMlaWeights rw(c, DType::kF32, 15);
  const int n = 48;
  const std::vector<float> x = random_rows(n, c.hidden_size, 8);
  LatentCache cache(c, 8, kBlockSize);
  const auto out = run_steps(c, rw.w, cache, 0, shuffled_blocks(8, 2), x.data(), {n}, pool);
  const MlaReference dense = mla_reference_fp64(c, rw.w, x.data(), n, false);
  const Deviation before = deviation(out, dense.out, c.hidden_size, 0, kFirstSparseRow);
  const Deviation after = deviation(out, dense.out, c.hidden_size, kFirstSparseRow, n);
  std::printf("layer vs dense reference: rows < %d rel %.3g, sparse rows rel %.3g\n",
              kFirstSparseRow, before.rel(), after.rel());
  EXPECT_LE(before.rel(), kRelTolerance);
  // Each sparse row drops at least one pool of 4 tokens; on random data that moves the output by
  // a sizeable fraction of its scale (a layer without the indexer would show ~1e-7 here).
  EXPECT_GT(after.rel(), 100 * kRelTolerance);
}

}  // namespace
}  // namespace sparkglm
