// swiglu_forward (the dense MLP and the expert body) against an FP64 reference.
#include "engine/backend/cpu/mlp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include <vector>

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/model/weight_quantizer.h"
#include "tests/support/test_linear.h"

namespace sparkglm::cpu {
namespace {

using testing::TestLinear;

struct TestSwiGlu {
  TestLinear gate, up, down;
  // gate_scale sets how far W_gate x and W_up x reach (to switch the clamp on or off).
  TestSwiGlu(int64_t D, int64_t W, DType dt, float gate_scale, std::mt19937& rng)
      : gate(W, D, dt, gate_scale, rng),
        up(W, D, dt, gate_scale, rng),
        down(D, W, dt, 1.0f / std::sqrt(float(W)), rng) {}
  SwiGluWeights weights() const { return {gate.view, up.view, down.view}; }
};

// FP64: W_down(SiLU(min(g, L)) * clamp(u, -L, L)) for one row; L <= 0: no clamp.
std::vector<double> swiglu_ref(const SwiGluWeights& w, const float* x, double L, int* clamped) {
  const int64_t D = w.gate.cols, W = w.gate.rows;
  std::vector<double> h(static_cast<size_t>(W));
  for (int64_t j = 0; j < W; ++j) {
    double g = 0.0, u = 0.0;
    for (int64_t k = 0; k < D; ++k) {
      g += double(w.gate.at(j, k)) * x[k];
      u += double(w.up.at(j, k)) * x[k];
    }
    if (clamped && (g > 10.0 || std::abs(u) > 10.0)) ++*clamped;
    if (L > 0.0) {
      g = std::min(g, L);
      u = std::clamp(u, -L, L);
    }
    h[size_t(j)] = g / (1.0 + std::exp(-g)) * u;
  }
  std::vector<double> y(size_t(D), 0.0);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < W; ++j) y[size_t(d)] += double(w.down.at(d, j)) * h[size_t(j)];
  return y;
}

std::vector<float> random_rows(int64_t T, int64_t D, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> x(size_t(T * D));
  for (auto& v : x) v = u(rng);
  return x;
}

struct Errors {
  double rel;        // max |y - ref| / max |ref|
  double other_rel;  // the same against the reference with the other clamp setting
  int clamped;       // reference pre-activations beyond +-10
};

Errors compare(const SwiGluWeights& w, const std::vector<float>& x, int64_t T, float limit,
               ThreadPool& pool) {
  const int64_t D = w.gate.cols;
  std::vector<float> y(size_t(T * D));
  swiglu_forward(w, x.data(), T, y.data(), pool, limit);
  double err = 0.0, other = 0.0, mx = 0.0;
  int clamped = 0;
  for (int64_t t = 0; t < T; ++t) {
    const auto ref = swiglu_ref(w, x.data() + t * D, limit, &clamped);
    const auto alt = swiglu_ref(w, x.data() + t * D, limit > 0.0f ? 0.0 : 10.0, nullptr);
    for (int64_t d = 0; d < D; ++d) {
      const double v = y[size_t(t * D + d)];
      err = std::max(err, std::abs(v - ref[size_t(d)]));
      other = std::max(other, std::abs(v - alt[size_t(d)]));
      mx = std::max(mx, std::abs(ref[size_t(d)]));
    }
  }
  return {err / mx, other / mx, clamped};
}

// FP32 dots of length <= 512 (8 lanes of 64 terms) plus SiLU's exp: measured ~1e-7 normalised;
// 1e-5 leaves room for other libm's exp and is still ~1e4 times below a wrong clamp or weight.
constexpr double kTol = 1e-5;

TEST(Mlp, DenseMatchesFp64WithoutClamp) {
  std::mt19937 rng(11);
  ThreadPool pool(2);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    // tinyglm-micro dense MLP: D 256, width 512. Gate scale 0.6 drives some W_gate x past 10,
    // so a clamp that should not be there would show.
    const TestSwiGlu mlp(256, 512, dt, 0.6f, rng);
    const auto x = random_rows(5, 256, 1.0f, rng);
    const Errors e = compare(mlp.weights(), x, 5, 0.0f, pool);
    std::printf("dense %s: rel err %.3g, vs clamped reference %.3g, %d pre-activations past 10\n",
                dt == DType::kF32 ? "f32" : "bf16", e.rel, e.other_rel, e.clamped);
    EXPECT_LT(e.rel, kTol);
    EXPECT_GT(e.clamped, 0);
    EXPECT_GT(e.other_rel, 100 * kTol);
  }
}

TEST(Mlp, ClampedMatchesFp64AndTheClampMatters) {
  std::mt19937 rng(12);
  ThreadPool pool(2);
  const TestSwiGlu expert(256, 64, DType::kBF16, 1.2f, rng);
  const auto x = random_rows(6, 256, 1.0f, rng);
  const Errors e = compare(expert.weights(), x, 6, 10.0f, pool);
  std::printf("clamped: rel err %.3g, vs unclamped reference %.3g, %d of %d past 10\n", e.rel,
              e.other_rel, e.clamped, 6 * 64);
  EXPECT_LT(e.rel, kTol);
  EXPECT_GT(e.clamped, 6 * 64 / 10);
  EXPECT_GT(e.other_rel, 100 * kTol);
}

TEST(Mlp, RowResultDoesNotDependOnBatchOrThreads) {
  std::mt19937 rng(13);
  const TestSwiGlu mlp(256, 512, DType::kBF16, 0.1f, rng);
  const auto batch = random_rows(7, 256, 1.0f, rng);
  const int64_t D = 256, target = 4;
  std::vector<float> first;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> alone(static_cast<size_t>(D)), all(size_t(7 * D));
    swiglu_forward(mlp.weights(), batch.data() + target * D, 1, alone.data(), pool, 0.0f);
    swiglu_forward(mlp.weights(), batch.data(), 7, all.data(), pool, 0.0f);
    EXPECT_EQ(std::memcmp(alone.data(), all.data() + target * D, size_t(D) * 4), 0) << threads;
    if (first.empty()) first = alone;
    EXPECT_EQ(std::memcmp(alone.data(), first.data(), size_t(D) * 4), 0) << threads;
  }
}

// Spark mode's routed expert: x and h are rounded through NVFP4 row by row (round_trip_nvfp4),
// then the same FP32 products and activation as strict.
TEST(Mlp, Fp4ActivationsRoundEachRowOfXAndHThroughNvfp4) {
  std::mt19937 rng(14);
  ThreadPool pool(2);
  const TestSwiGlu expert(256, 64, DType::kBF16, 0.3f, rng);
  const SwiGluWeights w = expert.weights();
  const int64_t T = 5, D = 256, W = 64;
  const auto x = random_rows(T, D, 2.0f, rng);
  const Fp4ActivationScales fp4{16.0f / 2688.0f, 100.0f / 2688.0f};
  std::vector<float> got(size_t(T * D)), strict(size_t(T * D)), want(size_t(T * D));
  swiglu_forward(w, x.data(), T, got.data(), pool, 10.0f, &fp4);
  swiglu_forward(w, x.data(), T, strict.data(), pool, 10.0f);
  std::vector<float> xq = x, g(size_t(T * W)), u(size_t(T * W));
  for (int64_t t = 0; t < T; ++t) round_trip_nvfp4(xq.data() + t * D, D, fp4.gate_up);
  EXPECT_NE(xq, x);
  linear(xq.data(), T, w.gate, g.data(), pool);
  linear(xq.data(), T, w.up, u.data(), pool);
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = silu(std::min(g[i], 10.0f)) * std::clamp(u[i], -10.0f, 10.0f);
  for (int64_t t = 0; t < T; ++t) round_trip_nvfp4(g.data() + t * W, W, fp4.down);
  linear(g.data(), T, w.down, want.data(), pool);
  EXPECT_EQ(got, want);
  EXPECT_NE(got, strict);
  // Each row is quantized on its own: a row alone gives the bits it gives in the batch.
  std::vector<float> alone(static_cast<size_t>(D));
  swiglu_forward(w, x.data() + 3 * D, 1, alone.data(), pool, 10.0f, &fp4);
  EXPECT_EQ(std::memcmp(alone.data(), got.data() + 3 * D, size_t(D) * 4), 0);
}

}  // namespace
}  // namespace sparkglm::cpu
