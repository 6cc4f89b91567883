// moe_forward against an FP64 MoE written here, and its batch invariance.
#include "engine/backend/cpu/moe_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>

#include <vector>

#include "engine/model/engine_fault.h"
#include "tests/support/test_linear.h"

namespace sparkglm::cpu {
namespace {

using testing::TestLinear;

// All of one MoE layer's weights; `w` points into the members.
struct TestMoe {
  std::vector<float> router;  // [E, D]
  std::vector<float> bias;    // [E]
  std::vector<std::unique_ptr<TestLinear>> mats;
  MoeWeights w;

  // gate_scale: range of the gate/up weights (large values switch the clamp on).
  TestMoe(const ModelConfig& c, DType dt, float gate_scale, std::mt19937& rng) {
    const int64_t D = c.hidden_size, W = c.moe_intermediate_size, E = c.n_routed_experts;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    router.resize(size_t(E * D));
    for (auto& v : router) v = u(rng) / std::sqrt(float(D));
    bias.resize(size_t(E));
    for (auto& v : bias) v = 0.05f * u(rng);
    w.router = router.data();
    w.score_bias = bias.data();
    auto swiglu = [&](int64_t width) {
      SwiGluWeights s;
      s.gate = add(width, D, dt, gate_scale, rng);
      s.up = add(width, D, dt, gate_scale, rng);
      s.down = add(D, width, dt, 1.0f / std::sqrt(float(width)), rng);
      return s;
    };
    for (int64_t e = 0; e < E; ++e) w.experts.push_back(swiglu(W));
    if (c.n_shared_experts > 0) w.shared = swiglu(W * c.n_shared_experts);
  }
  Linear add(int64_t rows, int64_t cols, DType dt, float scale, std::mt19937& rng) {
    mats.push_back(std::make_unique<TestLinear>(rows, cols, dt, scale, rng));
    return mats.back()->view;
  }
};

// FP64 clamped SwiGLU for one row (L <= 0: no clamp).
std::vector<double> swiglu_ref(const SwiGluWeights& w, const float* x, double L) {
  const int64_t D = w.gate.cols, W = w.gate.rows;
  std::vector<double> h(static_cast<size_t>(W)), y(size_t(D), 0.0);
  for (int64_t j = 0; j < W; ++j) {
    double g = 0.0, u = 0.0;
    for (int64_t k = 0; k < D; ++k) {
      g += double(w.gate.at(j, k)) * x[k];
      u += double(w.up.at(j, k)) * x[k];
    }
    if (L > 0.0) g = std::min(g, L), u = std::clamp(u, -L, L);
    h[size_t(j)] = g / (1.0 + std::exp(-g)) * u;
  }
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < W; ++j) y[size_t(d)] += double(w.down.at(d, j)) * h[size_t(j)];
  return y;
}

struct RefToken {
  std::vector<double> y;    // [D]
  std::vector<int> chosen;  // [k] in rank order
  double margin;            // k-th key minus (k+1)-th key: how safely FP32 picks the same set
  double max_gate;          // largest W_gate x among the chosen experts
};

// FP64 MODEL.md section 5 for one token, written independently of the engine.
RefToken moe_ref(const ModelConfig& c, const TestMoe& m, const float* x, double limit) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok;
  std::vector<double> s(static_cast<size_t>(E)), key(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    double l = 0.0;
    for (int64_t d = 0; d < D; ++d) l += double(m.router[size_t(e * D + d)]) * x[d];
    s[size_t(e)] = 1.0 / (1.0 + std::exp(-l));
    key[size_t(e)] = s[size_t(e)] + m.bias[size_t(e)];
  }
  std::vector<int> order(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return key[size_t(a)] > key[size_t(b)]; });
  RefToken r;
  r.chosen.assign(order.begin(), order.begin() + k);
  r.margin = k < E ? key[size_t(order[size_t(k - 1)])] - key[size_t(order[size_t(k)])] : 1.0;
  double sum = 0.0;
  for (int e : r.chosen) sum += s[size_t(e)];
  r.y.assign(size_t(D), 0.0);
  r.max_gate = -1e30;
  for (int e : r.chosen) {
    const SwiGluWeights& ew = m.w.experts[size_t(e)];
    for (int64_t j = 0; j < ew.gate.rows; ++j) {
      double g = 0.0;
      for (int64_t d = 0; d < D; ++d) g += double(ew.gate.at(j, d)) * x[d];
      r.max_gate = std::max(r.max_gate, g);
    }
    const auto ye = swiglu_ref(ew, x, limit);
    const double we = s[size_t(e)] / sum * c.routed_scaling_factor;
    for (int64_t d = 0; d < D; ++d) r.y[size_t(d)] += we * ye[size_t(d)];
  }
  if (m.w.shared) {
    const auto ys = swiglu_ref(*m.w.shared, x, limit);
    for (int64_t d = 0; d < D; ++d) r.y[size_t(d)] += ys[size_t(d)];
  }
  return r;
}

ModelConfig micro(int experts, int k) {
  ModelConfig c = preset_config("tinyglm-micro");  // D 256, width 64, one shared expert
  c.n_routed_experts = experts;
  c.num_experts_per_tok = k;
  return c;
}

std::vector<float> random_rows(int64_t T, int64_t D, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> x(size_t(T * D));
  for (auto& v : x) v = u(rng);
  return x;
}

struct Result {
  double rel;            // max |y - ref| / max |ref|
  double unclamped_rel;  // the same against the reference without the clamp
  double min_margin;
  double max_gate;
  std::vector<std::vector<int>> chosen;  // [T][k]
};

Result run_and_compare(const ModelConfig& c, const TestMoe& m, const std::vector<float>& x,
                       int64_t T, ThreadPool& pool, EngineFault fault = EngineFault::kNone) {
  const int64_t D = c.hidden_size;
  std::vector<float> y(size_t(T * D));
  moe_forward(c, m.w, x.data(), T, y.data(), pool, 0, -1, fault);
  Result r{0.0, 0.0, 1e30, -1e30, {}};
  double err = 0.0, err_nc = 0.0, mx = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    const RefToken ref = moe_ref(c, m, x.data() + t * D, c.swiglu_limit);
    const RefToken nc = moe_ref(c, m, x.data() + t * D, 0.0);
    r.min_margin = std::min(r.min_margin, ref.margin);
    r.max_gate = std::max(r.max_gate, ref.max_gate);
    r.chosen.push_back(ref.chosen);
    for (int64_t d = 0; d < D; ++d) {
      const double v = y[size_t(t * D + d)];
      err = std::max(err, std::abs(v - ref.y[size_t(d)]));
      err_nc = std::max(err_nc, std::abs(v - nc.y[size_t(d)]));
      mx = std::max(mx, std::abs(ref.y[size_t(d)]));
    }
  }
  r.rel = err / mx;
  r.unclamped_rel = err_nc / mx;
  return r;
}

// FP32 dots of length <= 256 and 64, FP32 sigmoid and weight normalisation: measured ~1e-7
// normalised; 1e-5 leaves room for other libm's exp and stays far below any wrong expert or
// weight (those move the output by O(1) of its range).
constexpr double kTol = 1e-5;
// Below this gap between the k-th and (k+1)-th FP64 keys FP32 could legitimately choose another
// set (FP32 logits are accurate to ~1e-6 here), and the comparison would be meaningless.
constexpr double kMinMargin = 1e-5;

void expect_matches(const char* name, const Result& r) {
  std::printf("%s: rel err %.3g, min routing margin %.3g, max W_gate x %.3g\n", name, r.rel,
              r.min_margin, r.max_gate);
  EXPECT_LT(r.rel, kTol) << name;
  ASSERT_GT(r.min_margin, kMinMargin) << name;
}

TEST(MoeLayer, MicroTop2Of8MatchesFp64) {
  std::mt19937 rng(21);
  ThreadPool pool(2);
  const ModelConfig c = micro(8, 2);
  const TestMoe m(c, DType::kBF16, 0.15f, rng);
  expect_matches("micro top-2 of 8 bf16",
                 run_and_compare(c, m, random_rows(9, 256, 1.0f, rng), 9, pool));
}

TEST(MoeLayer, Top8Of16MatchesFp64) {
  std::mt19937 rng(22);
  ThreadPool pool(2);
  const ModelConfig c = micro(16, 8);
  const TestMoe m(c, DType::kF32, 0.15f, rng);
  expect_matches("top-8 of 16 f32", run_and_compare(c, m, random_rows(9, 256, 1.0f, rng), 9, pool));
}

TEST(MoeLayer, AllRowsRoutedToOneExpert) {
  std::mt19937 rng(23);
  ThreadPool pool(2);
  const ModelConfig c = micro(8, 2);
  TestMoe m(c, DType::kBF16, 0.15f, rng);
  m.bias[3] = 10.0f;  // s + bias > 10 beats every other key (< 1.05)
  const Result r = run_and_compare(c, m, random_rows(6, 256, 1.0f, rng), 6, pool);
  expect_matches("all rows to expert 3", r);
  for (const auto& ch : r.chosen) EXPECT_EQ(ch[0], 3);
}

TEST(MoeLayer, RowsSpreadOverEveryExpert) {
  std::mt19937 rng(24);
  ThreadPool pool(2);
  const ModelConfig c = micro(8, 2);
  TestMoe m(c, DType::kBF16, 0.15f, rng);
  // Router row e reads feature e; token t carries 4 on feature t%8 and 3 on feature (t+1)%8,
  // so it picks experts t%8 and (t+1)%8 and every expert gets exactly two rows.
  const int64_t D = 256, T = 8;
  for (int e = 0; e < 8; ++e) m.router[size_t(e * D + e)] = 2.0f;
  auto x = random_rows(T, D, 0.3f, rng);
  for (int64_t t = 0; t < T; ++t) {
    x[size_t(t * D + t % 8)] = 4.0f;
    x[size_t(t * D + (t + 1) % 8)] = 3.0f;
  }
  const Result r = run_and_compare(c, m, x, T, pool);
  expect_matches("spread over all experts", r);
  std::vector<int> rows(8, 0);
  for (const auto& ch : r.chosen)
    for (int e : ch) ++rows[size_t(e)];
  for (int e = 0; e < 8; ++e) EXPECT_EQ(rows[size_t(e)], 2) << "expert " << e;
}

TEST(MoeLayer, ClampIsActiveAndRequired) {
  std::mt19937 rng(25);
  ThreadPool pool(2);
  const ModelConfig c = micro(8, 2);
  // Gate/up weights in +-1.2 over 256 inputs in +-1: W_gate x has a spread of ~6.9, so a good
  // share of pre-activations exceed the limit of 10.
  const TestMoe m(c, DType::kBF16, 1.2f, rng);
  const Result r = run_and_compare(c, m, random_rows(8, 256, 1.0f, rng), 8, pool);
  expect_matches("clamp active", r);
  std::printf("  against the unclamped reference: rel err %.3g\n", r.unclamped_rel);
  EXPECT_GT(r.max_gate, 10.0);
  EXPECT_GT(r.unclamped_rel, 100 * kTol);  // without the clamp this test would fail
}

// The negative control of engine/model/engine_fault.h: the same experts as above run unclamped, so
// the output matches the unclamped reference and misses the clamped one.
TEST(MoeLayer, TheClampDroppedControlRunsTheExpertsUnclamped) {
  std::mt19937 rng(25);
  ThreadPool pool(2);
  const ModelConfig c = micro(8, 2);
  const TestMoe m(c, DType::kBF16, 1.2f, rng);
  const Result r =
      run_and_compare(c, m, random_rows(8, 256, 1.0f, rng), 8, pool, EngineFault::kMoeClampDropped);
  std::printf("clamp dropped: rel err %.3g against the clamped reference, %.3g unclamped\n", r.rel,
              r.unclamped_rel);
  EXPECT_GT(r.max_gate, 10.0);
  EXPECT_LT(r.unclamped_rel, kTol);
  EXPECT_GT(r.rel, 100 * kTol);
}

TEST(MoeLayer, TokenOutputIsBatchInvariant) {
  for (auto [experts, k] : {std::pair{8, 2}, std::pair{16, 8}}) {
    std::mt19937 rng(26);
    const ModelConfig c = micro(experts, k);
    const TestMoe m(c, DType::kBF16, 0.15f, rng);
    const int64_t D = 256, T = 7, target = 4;
    const auto batch = random_rows(T, D, 1.0f, rng);
    std::vector<float> first;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> alone(static_cast<size_t>(D)), all(size_t(T * D));
      moe_forward(c, m.w, batch.data() + target * D, 1, alone.data(), pool);
      moe_forward(c, m.w, batch.data(), T, all.data(), pool);
      EXPECT_EQ(std::memcmp(alone.data(), all.data() + target * D, size_t(D) * 4), 0)
          << "top-" << k << " of " << experts << ", " << threads << " threads";
      if (first.empty()) first = alone;
      EXPECT_EQ(std::memcmp(alone.data(), first.data(), size_t(D) * 4), 0)
          << "top-" << k << " of " << experts << ": 1 vs " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace sparkglm::cpu
