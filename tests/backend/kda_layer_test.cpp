#include "engine/backend/cpu/kda_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "engine/core/thread_pool.h"
#include "engine/model/config.h"
#include "engine/model/forward_batch.h"
#include "engine/runtime/kda_state_pool.h"
#include "tests/backend/kda_reference.h"

namespace sparkglm::kda_test {
namespace {

using cpu::KdaPath;

constexpr int kLayer = 1;  // a KDA layer index other than 0, so a wrong layer offset shows

// One sequence's rows [begin, end) of x ([N, D]) fed as a single slice at position `begin`.
std::vector<float> run_slice(const TestLayer& layer, KdaStatePool& states, int slot,
                             const std::vector<float>& x, int begin, int end, ThreadPool& pool,
                             KdaPath path) {
  const int d = layer.config.hidden_size;
  ForwardBatch batch;
  batch.add_sequence(std::vector<int32_t>(size_t(end - begin), 0), begin, slot, {});
  std::vector<float> out(size_t(end - begin) * d);  // [end - begin, D]
  cpu::kda_layer_forward(layer.config, layer.w, kLayer, batch, states, &x[size_t(begin) * d],
                         out.data(), pool, path);
  return out;
}

// Rows [0, n) fed as the given slices in order: each entry of `cuts` ends one slice.
std::vector<float> run_slices(const TestLayer& layer, KdaStatePool& states, int slot,
                              const std::vector<float>& x, const std::vector<int>& cuts,
                              ThreadPool& pool, KdaPath path) {
  std::vector<float> out;  // [n, D]
  int begin = 0;
  for (int end : cuts) {
    const std::vector<float> part = run_slice(layer, states, slot, x, begin, end, pool, path);
    out.insert(out.end(), part.begin(), part.end());
    begin = end;
  }
  return out;
}

std::vector<int> every_row(int begin, int end) {  // cuts for one-row (decode) slices
  std::vector<int> cuts;
  for (int r = begin + 1; r <= end; ++r) cuts.push_back(r);
  return cuts;
}

std::vector<float> state_of(KdaStatePool& states, int slot) {  // [H, K, V]
  const float* s = states.state(slot, kLayer);
  return std::vector<float>(s, s + states.state_floats());
}
std::vector<float> conv_of(KdaStatePool& states, int slot) {  // [3, taps - 1, H*K]
  const float* s = states.conv(slot, kLayer);
  return std::vector<float>(s, s + states.conv_floats());
}

ModelConfig micro() {
  return preset_config("tinyglm-micro");
}

// 1. Token by token against the FP64 reference. Tolerance 5e-6 of the output (state) scale: FP32
// rounding (unit 6e-8) through the D = 256 long projections, the 40-step recurrence and the
// output RMSNorm measures 4.3e-7 (2.3e-7 for the state); 5e-6 leaves a 10x margin, while a wrong
// formula (a missing decay, the read before the decay, q not scaled, another eps) errs by 1e-3 or
// more.
TEST(KdaLayer, RecurrentMatchesFp64Reference) {
  const TestLayer layer(micro(), 11, DType::kBF16);
  const int n = 40;
  const std::vector<float> x = random_rows(n, layer.config.hidden_size, 12);
  const Reference ref = reference_forward(layer, x, n);
  ThreadPool pool(2);
  // A 25-row slice, then decode steps: both recurrent.
  KdaStatePool states(layer.config, 2);
  std::vector<int> cuts = every_row(25, n);
  cuts.insert(cuts.begin(), 25);
  const std::vector<float> out = run_slices(layer, states, 1, x, cuts, pool, KdaPath::kRecurrent);
  const Mismatch e_out = compare(out, ref.out);
  const Mismatch e_state = compare(state_of(states, 1), ref.state);
  EXPECT_LT(e_out.rel, 5e-6) << "output: " << e_out.str();
  EXPECT_LT(e_state.rel, 5e-6) << "state: " << e_state.str();
}

// Tolerance between the chunked and the token-by-token forms, relative to the output (or state)
// scale. Both are FP32 and differ only in summation order (Gram products, the triangular solve,
// decays applied once per chunk instead of once per step): measured at most 4.1e-7 (micro) and
// 6.5e-7 (tinyGLM shape) for outputs, 3.9e-7 for states. 5e-6 keeps a margin of about 8x, while
// an algebra error (a missing e^{G} factor, an off-by-one in the cumulative decay, an unmasked
// diagonal) errs by 1e-3 or more.
constexpr double kChunkTolerance = 5e-6;

// 2. Chunked prefill equals token-by-token recurrence across chunk boundaries.
TEST(KdaLayer, ChunkedPrefillMatchesRecurrence) {
  const TestLayer layer(micro(), 21, DType::kBF16);
  ThreadPool pool(2);
  for (int n : {1, 63, 64, 65, 130, 200}) {
    const std::vector<float> x = random_rows(n, layer.config.hidden_size, 22 + uint64_t(n));
    KdaStatePool states(layer.config, 2);
    const std::vector<float> chunked = run_slice(layer, states, 0, x, 0, n, pool, KdaPath::kAuto);
    const std::vector<float> recurrent =
        run_slice(layer, states, 1, x, 0, n, pool, KdaPath::kRecurrent);
    const Mismatch e_out = compare(chunked, recurrent);
    const Mismatch e_state = compare(state_of(states, 0), state_of(states, 1));
    EXPECT_LT(e_out.rel, kChunkTolerance) << "n = " << n << " output: " << e_out.str();
    EXPECT_LT(e_state.rel, kChunkTolerance) << "n = " << n << " state: " << e_state.str();
    // The convolution is shared code: its history must match bit for bit.
    EXPECT_TRUE(bitwise_equal(conv_of(states, 0), conv_of(states, 1))) << "n = " << n;
  }
}

// 3a. Prefill then one-row decode steps equals running the whole sequence token by token.
TEST(KdaLayer, PrefillThenDecodeMatchesRecurrence) {
  const TestLayer layer(micro(), 31, DType::kF32);
  ThreadPool pool(2);
  const int n = 140;
  const std::vector<float> x = random_rows(n, layer.config.hidden_size, 32);
  KdaStatePool states(layer.config, 2);
  std::vector<int> cuts = every_row(100, n);
  cuts.insert(cuts.begin(), 100);
  const std::vector<float> served = run_slices(layer, states, 0, x, cuts, pool, KdaPath::kAuto);
  const std::vector<float> recurrent =
      run_slice(layer, states, 1, x, 0, n, pool, KdaPath::kRecurrent);
  const Mismatch e_out = compare(served, recurrent);
  const Mismatch e_state = compare(state_of(states, 0), state_of(states, 1));
  EXPECT_LT(e_out.rel, kChunkTolerance) << "output: " << e_out.str();
  EXPECT_LT(e_state.rel, kChunkTolerance) << "state: " << e_state.str();
  EXPECT_TRUE(bitwise_equal(conv_of(states, 0), conv_of(states, 1)));
}

// 3b. A prefill resumed mid-chunk equals a cold one within the chunk tolerance; resumed at a
// chunk boundary it runs the same chunks, so it must be bitwise equal. Chunks are aligned to
// absolute positions: a slice from 100 runs [100, 128), [128, 192), ..., exactly what slices
// [100, 128) and [128, ...) run.
TEST(KdaLayer, ResumedPrefillMatchesColdPrefill) {
  const TestLayer layer(micro(), 41, DType::kBF16);
  ThreadPool pool(2);
  const int n = 200;
  const std::vector<float> x = random_rows(n, layer.config.hidden_size, 42);
  KdaStatePool states(layer.config, 4);
  const std::vector<float> cold = run_slices(layer, states, 0, x, {n}, pool, KdaPath::kAuto);
  const std::vector<float> mid = run_slices(layer, states, 1, x, {100, n}, pool, KdaPath::kAuto);
  const std::vector<float> aligned =
      run_slices(layer, states, 2, x, {128, n}, pool, KdaPath::kAuto);
  const std::vector<float> mid_split =
      run_slices(layer, states, 3, x, {100, 128, n}, pool, KdaPath::kAuto);
  const Mismatch e_out = compare(mid, cold);
  const Mismatch e_state = compare(state_of(states, 1), state_of(states, 0));
  EXPECT_LT(e_out.rel, kChunkTolerance) << "output: " << e_out.str();
  EXPECT_LT(e_state.rel, kChunkTolerance) << "state: " << e_state.str();
  EXPECT_TRUE(bitwise_equal(aligned, cold));
  EXPECT_TRUE(bitwise_equal(state_of(states, 2), state_of(states, 0)));
  EXPECT_TRUE(bitwise_equal(conv_of(states, 2), conv_of(states, 0)));
  EXPECT_TRUE(bitwise_equal(mid_split, mid));
  EXPECT_TRUE(bitwise_equal(state_of(states, 3), state_of(states, 1)));
}

// 4. A sequence's rows are bitwise the same alone (one thread) and in a batch of sequences of
// other lengths, positions and slots (one and two threads).
TEST(KdaLayer, BatchAndThreadInvariant) {
  const TestLayer layer(micro(), 51, DType::kBF16);
  const int d = layer.config.hidden_size;
  struct Seq {
    int prefix, rows;  // rows [0, prefix) are run first, alone; then [prefix, prefix + rows)
    int slot;          // slot inside the batch
  };
  const std::vector<Seq> seqs = {{37, 1, 3}, {0, 70, 1}, {100, 20, 5}, {0, 130, 2}, {64, 3, 0}};
  std::vector<std::vector<float>> xs;
  for (size_t i = 0; i < seqs.size(); ++i)
    xs.push_back(random_rows(seqs[i].prefix + seqs[i].rows, d, 52 + i));

  // Alone, slot 0, one thread.
  ThreadPool one(1), two(2);
  std::vector<std::vector<float>> alone_out, alone_state, alone_conv;
  for (size_t i = 0; i < seqs.size(); ++i) {
    KdaStatePool states(layer.config, 1);
    const Seq& s = seqs[i];
    if (s.prefix > 0) run_slice(layer, states, 0, xs[i], 0, s.prefix, one, KdaPath::kAuto);
    alone_out.push_back(
        run_slice(layer, states, 0, xs[i], s.prefix, s.prefix + s.rows, one, KdaPath::kAuto));
    alone_state.push_back(state_of(states, 0));
    alone_conv.push_back(conv_of(states, 0));
  }

  for (ThreadPool* pool : {&one, &two}) {
    KdaStatePool states(layer.config, 6);
    ForwardBatch batch;
    std::vector<float> x;  // [T, D]
    for (size_t i = 0; i < seqs.size(); ++i) {
      const Seq& s = seqs[i];
      if (s.prefix > 0) run_slice(layer, states, s.slot, xs[i], 0, s.prefix, *pool, KdaPath::kAuto);
      batch.add_sequence(std::vector<int32_t>(size_t(s.rows), 0), s.prefix, s.slot, {});
      x.insert(x.end(), xs[i].begin() + ptrdiff_t(s.prefix) * d, xs[i].end());
    }
    std::vector<float> out(x.size());  // [T, D]
    cpu::kda_layer_forward(layer.config, layer.w, kLayer, batch, states, x.data(), out.data(),
                           *pool, KdaPath::kAuto);
    for (size_t i = 0; i < seqs.size(); ++i) {
      const SequenceSlice& sl = batch.seqs[i];
      SCOPED_TRACE("threads " + std::to_string(pool->size()) + ", sequence " + std::to_string(i));
      EXPECT_TRUE(bitwise_equal(&out[size_t(sl.first_row) * d], alone_out[i].data(),
                                size_t(sl.num_rows) * d));
      EXPECT_TRUE(bitwise_equal(state_of(states, seqs[i].slot), alone_state[i]));
      EXPECT_TRUE(bitwise_equal(conv_of(states, seqs[i].slot), alone_conv[i]));
    }
    // Only the batch's slots of layer kLayer are written: slot 4 and layer 0 stay zero.
    const std::vector<float> zero(size_t(states.state_floats()), 0.0f);
    EXPECT_TRUE(bitwise_equal(state_of(states, 4), zero));
    EXPECT_TRUE(bitwise_equal(states.state(1, 0), zero.data(), zero.size()));
  }
}

// Observes every channel's gate of one decode step: with beta = 0 (b_proj saturates the
// sigmoid: all-positive x against all -100 weights) the step is S = diag(e^g) S0, so with S0 = 1
// the state holds e^g. Returns g per channel, [H*K].
std::vector<double> observed_gates(TestLayer& layer) {
  const ModelConfig& c = layer.config;
  std::vector<float> b_proj(size_t(c.kda.num_heads) * c.hidden_size, -100.0f);  // [H, D]
  const Linear original = layer.w.b_proj;
  layer.w.b_proj = Linear{DType::kF32, c.kda.num_heads, c.hidden_size, b_proj.data()};
  const std::vector<float> x = random_rows(1, c.hidden_size, 61, 0.1, 1.0);
  KdaStatePool states(c, 1);
  float* s = states.state(0, kLayer);  // [H, K, V]
  std::fill_n(s, states.state_floats(), 1.0f);
  ThreadPool pool(2);
  run_slice(layer, states, 0, x, 0, 1, pool, KdaPath::kAuto);
  layer.w.b_proj = original;
  const int vd = c.kda.head_dim;
  std::vector<double> g;  // [H*K]
  for (int64_t row = 0; row < states.state_floats() / vd; ++row) {
    const float* sr = s + row * vd;  // [V]: e^g in every column when nothing was written
    const auto other = std::find_if(sr, sr + vd, [&](float e) { return e != sr[0]; });
    EXPECT_EQ(other, sr + vd) << "beta is not 0: row " << row << " holds " << sr[0] << " and "
                              << *other;
    g.push_back(std::log(double(sr[0])));
  }
  return g;
}

// 5a. Gates lie in [gate_lower_bound, 0]: strictly inside for moderate inputs; FP32's sigmoid
// saturates to exactly 0 or 1 for large ones, so the bounds themselves are reachable, but never
// crossed and never NaN, even for extreme A_log and dt_bias.
TEST(KdaLayer, GatesStayBetweenLowerBoundAndZero) {
  TestLayer layer(micro(), 61, DType::kF32);
  const double lower = layer.config.kda.gate_lower_bound;
  const double slack = 1e-6;  // log of e^g rounded to FP32 is within 1e-7 of g
  const int nh = layer.config.kda.num_heads;

  // Ordinary weights: the gates should spread over most of the interval.
  std::vector<double> g = observed_gates(layer);
  auto [lo, hi] = std::minmax_element(g.begin(), g.end());
  EXPECT_GE(*lo, lower - slack) << "min gate";
  EXPECT_LE(*hi, 0.0) << "max gate";
  EXPECT_LT(*lo, lower + 1.0) << "the test should see fast decays";
  EXPECT_GT(*hi, -0.01) << "the test should see slow decays";

  // A_log = 0, dt_bias = 0: g = lower * sigmoid(f) with f of order one, strictly inside.
  std::fill(layer.a_log.begin(), layer.a_log.end(), 0.0f);
  std::fill(layer.dt_bias.begin(), layer.dt_bias.end(), 0.0f);
  layer.bind();
  g = observed_gates(layer);
  std::tie(lo, hi) = std::minmax_element(g.begin(), g.end());
  EXPECT_GT(*lo, lower) << "min gate";
  EXPECT_LT(*hi, 0.0) << "max gate";

  // Extreme: exp(A_log) overflowing FP32, huge and tiny, against dt_bias of +-50.
  for (int h = 0; h < nh; ++h) layer.a_log[size_t(h)] = std::vector<float>{100, 30, -30, 5}[h % 4];
  for (size_t i = 0; i < layer.dt_bias.size(); ++i) layer.dt_bias[i] = i % 2 ? 50.0f : -50.0f;
  layer.bind();
  g = observed_gates(layer);
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_FALSE(std::isnan(g[i])) << "channel " << i;
    EXPECT_GE(g[i], lower - slack) << "channel " << i;
    EXPECT_LE(g[i], 0.0) << "channel " << i;
  }
}

// 5b. Extreme gates (g = -5 on every step, so a 64-chunk's cumulative decay reaches -320, next
// to g = 0) must not overflow the chunked form: outputs and state stay finite and still match
// the recurrence within the chunk tolerance. The slice starts at position 30, so its first chunk
// [30, 64) is partial.
TEST(KdaLayer, ExtremeGatesStayFiniteInChunkedPrefill) {
  TestLayer layer(micro(), 71, DType::kBF16);
  const int nh = layer.config.kda.num_heads, kd = layer.config.kda.head_dim;
  for (int h = 0; h < nh; ++h) {
    layer.a_log[size_t(h)] = std::vector<float>{100, 20, 3, 0}[h % 4];
    for (int i = 0; i < kd; ++i)  // heads 0, 1 saturate at -5; 2 mixes -5 and 0; 3 ordinary
      layer.dt_bias[size_t(h * kd + i)] = h < 2 ? 30.0f : h == 2 ? (i % 2 ? 30.0f : -30.0f) : -1.0f;
  }
  layer.bind();
  ThreadPool pool(2);
  const int n = 200;
  const std::vector<float> x = random_rows(n, layer.config.hidden_size, 72);
  KdaStatePool states(layer.config, 2);
  const std::vector<float> chunked = run_slice(layer, states, 0, x, 30, n, pool, KdaPath::kAuto);
  const std::vector<float> recurrent =
      run_slice(layer, states, 1, x, 30, n, pool, KdaPath::kRecurrent);
  for (const std::vector<float>& v : {chunked, state_of(states, 0)})
    for (size_t i = 0; i < v.size(); ++i) ASSERT_TRUE(std::isfinite(v[i])) << i << ": " << v[i];
  const Mismatch e_out = compare(chunked, recurrent);
  const Mismatch e_state = compare(state_of(states, 0), state_of(states, 1));
  EXPECT_LT(e_out.rel, kChunkTolerance) << "output: " << e_out.str();
  EXPECT_LT(e_state.rel, kChunkTolerance) << "state: " << e_state.str();
}

// 6. The production head shape (H = 64, K = V = 128, D = 4096): chunked against recurrent over
// 70 tokens (one full chunk and a partial one), same tolerance.
TEST(KdaLayer, ChunkedMatchesRecurrenceAtTinyGlmShape) {
  const ModelConfig c = preset_config("tinyglm");
  ASSERT_EQ(c.kda.num_heads, 64);
  ASSERT_EQ(c.kda.head_dim, 128);
  const auto layer = std::make_unique<TestLayer>(c, 81, DType::kBF16);
  ThreadPool pool(2);
  const int n = 70;
  const std::vector<float> x = random_rows(n, c.hidden_size, 82);
  KdaStatePool states(c, 2);
  const std::vector<float> chunked = run_slice(*layer, states, 0, x, 0, n, pool, KdaPath::kAuto);
  const std::vector<float> recurrent =
      run_slice(*layer, states, 1, x, 0, n, pool, KdaPath::kRecurrent);
  const Mismatch e_out = compare(chunked, recurrent);
  const Mismatch e_state = compare(state_of(states, 0), state_of(states, 1));
  EXPECT_LT(e_out.rel, kChunkTolerance) << "output: " << e_out.str();
  EXPECT_LT(e_state.rel, kChunkTolerance) << "state: " << e_state.str();
}

}  // namespace
}  // namespace sparkglm::kda_test
