#pragma once
// Test support for the KDA layer: a layer with test-owned random weights, an FP64 reference
// written straight from MODEL.md section 3 (independent of the engine's code), and error
// measures that print their numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sparkglm::kda_test {

// Deterministic uniform numbers (splitmix64): every run sees the same weights and inputs.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  double uniform(double lo, double hi) {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * double(z >> 11) * 0x1.0p-53;
  }

 private:
  uint64_t s_;
};

// One KDA layer's weights in test-owned storage. Projections have variance 1/fan_in (activations
// of order one), gates span long memory (g near 0) to fast forgetting (g near -5).
class TestLayer {
 public:
  TestLayer(const ModelConfig& c, uint64_t seed, DType dtype)
      : config(c), rng_(seed), dtype_(dtype) {
    const int64_t nh = c.kda.num_heads, kd = c.kda.head_dim, hk = nh * kd, d = c.hidden_size;
    const int taps = c.kda.short_conv_kernel_size;
    w.q_proj = projection(hk, d);
    w.k_proj = projection(hk, d);
    w.v_proj = projection(hk, d);
    q_conv = uniform(hk * taps, -0.5, 0.5);
    k_conv = uniform(hk * taps, -0.5, 0.5);
    v_conv = uniform(hk * taps, -0.5, 0.5);
    w.f_a = projection(kd, d);
    w.f_b = projection(hk, kd);
    a_log = uniform(nh, 0.0, std::log(16.0));
    dt_bias = uniform(hk, -6.0, 1.0);
    w.b_proj = projection(nh, d);
    w.g_a = projection(kd, d);
    w.g_b = projection(hk, kd);
    o_norm = uniform(kd, 0.9, 1.1);
    w.o_proj = projection(d, hk);
    bind();
  }
  TestLayer(const TestLayer&) = delete;
  TestLayer& operator=(const TestLayer&) = delete;

  // Re-points the weights at the small F32 tensors after a test edited them.
  void bind() {
    w.q_conv = q_conv.data();
    w.k_conv = k_conv.data();
    w.v_conv = v_conv.data();
    w.a_log = a_log.data();
    w.dt_bias = dt_bias.data();
    w.o_norm = o_norm.data();
  }

  ModelConfig config;
  std::vector<float> q_conv, k_conv, v_conv;  // [H*K, taps]
  std::vector<float> a_log;                   // [H]
  std::vector<float> dt_bias;                 // [H*K]
  std::vector<float> o_norm;                  // [V]
  KdaWeights w;

 private:
  std::vector<float> uniform(int64_t n, double lo, double hi) {
    std::vector<float> v(static_cast<size_t>(n));  // [n]
    for (float& e : v) e = float(rng_.uniform(lo, hi));
    return v;
  }
  Linear projection(int64_t rows, int64_t cols) {
    const double a = std::sqrt(3.0 / double(cols));  // uniform(-a, a) has variance 1/cols
    Linear l;
    l.dtype = dtype_;
    l.rows = rows;
    l.cols = cols;
    if (dtype_ == DType::kBF16) {
      auto& s = bf16_.emplace_back(size_t(rows * cols));  // [rows, cols]
      for (uint16_t& e : s) e = f32_to_bf16(float(rng_.uniform(-a, a)));
      l.data = s.data();
    } else {
      f32_.push_back(uniform(rows * cols, -a, a));  // [rows, cols]
      l.data = f32_.back().data();
    }
    return l;
  }

  Rng rng_;
  DType dtype_;
  std::vector<std::vector<float>> f32_;      // moved vectors keep their buffers: pointers stay
  std::vector<std::vector<uint16_t>> bf16_;  // valid as these grow
};

// n rows of width d with variance 1, like the output of input_layernorm.
inline std::vector<float> random_rows(int n, int d, uint64_t seed, double lo = -std::sqrt(3.0),
                                      double hi = std::sqrt(3.0)) {
  Rng rng(seed);
  std::vector<float> x(size_t(n) * d);  // [n, d]
  for (float& e : x) e = float(rng.uniform(lo, hi));
  return x;
}

// Normwise error: max |got - want| and that divided by max |want|. A non-finite value counts as
// an infinite error.
struct Mismatch {
  double max_abs = 0, rel = 0, scale = 0;
  size_t at = 0;
  std::string str() const {
    std::ostringstream os;
    os << std::scientific << std::setprecision(3) << "max abs " << max_abs << " at " << at
       << ", max |ref| " << scale << ", rel " << rel;
    return os.str();
  }
};
template <typename Want>
inline Mismatch compare(const float* got, const Want* want, size_t n) {
  Mismatch e;
  for (size_t i = 0; i < n; ++i) {
    e.scale = std::max(e.scale, std::abs(double(want[i])));
    const double diff = std::abs(double(got[i]) - double(want[i]));
    const double err = std::isfinite(got[i]) ? diff : std::numeric_limits<double>::infinity();
    if (!(err <= e.max_abs)) {
      e.max_abs = err;
      e.at = i;
    }
  }
  e.rel = e.max_abs / std::max(e.scale, 1e-30);
  return e;
}
template <typename Want>
inline Mismatch compare(const std::vector<float>& got, const std::vector<Want>& want) {
  EXPECT_EQ(got.size(), want.size());
  return compare(got.data(), want.data(), std::min(got.size(), want.size()));
}

// Bitwise equality of n floats, reporting the first difference.
inline ::testing::AssertionResult bitwise_equal(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << "first difference at " << i << " of " << n << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}
inline ::testing::AssertionResult bitwise_equal(const std::vector<float>& a,
                                                const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size();
  return bitwise_equal(a.data(), b.data(), a.size());
}

// The FP64 reference: MODEL.md section 3 one token at a time, doubles throughout, written
// independently of the engine (no shared helpers).
struct Reference {
  std::vector<double> out;    // [n, D]
  std::vector<double> state;  // [H, K, V]
};
inline Reference reference_forward(const TestLayer& layer, const std::vector<float>& x, int n) {
  const ModelConfig& c = layer.config;
  const KdaWeights& w = layer.w;
  const int nh = c.kda.num_heads, kd = c.kda.head_dim, vd = kd, d = c.hidden_size;
  const int hk = nh * kd, taps = c.kda.short_conv_kernel_size;
  auto project = [&](const Linear& l, const double* in) {  // [l.rows] = W in
    std::vector<double> y(size_t(l.rows));
    for (int64_t r = 0; r < l.rows; ++r) {
      double s = 0;
      for (int64_t k = 0; k < l.cols; ++k) s += double(l.at(r, k)) * in[k];
      y[size_t(r)] = s;
    }
    return y;
  };
  auto sigmoid = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
  std::vector<std::vector<double>> raw[3];  // q, k, v before the conv: [n][H*K]
  Reference ref;
  ref.out.assign(size_t(n) * d, 0.0);
  ref.state.assign(size_t(hk) * vd, 0.0);
  for (int t = 0; t < n; ++t) {
    const std::vector<double> xt(&x[size_t(t) * d], &x[size_t(t + 1) * d]);  // [D]
    raw[0].push_back(project(w.q_proj, xt.data()));
    raw[1].push_back(project(w.k_proj, xt.data()));
    raw[2].push_back(project(w.v_proj, xt.data()));
    const float* conv_w[3] = {w.q_conv, w.k_conv, w.v_conv};
    std::vector<double> qkv[3];  // [H*K] each, after conv and SiLU
    for (int m = 0; m < 3; ++m) {
      qkv[m].assign(size_t(hk), 0.0);
      for (int ch = 0; ch < hk; ++ch) {
        double s = 0;
        for (int j = 0; j < taps; ++j) {
          const int p = t - (taps - 1) + j;
          if (p >= 0) s += double(conv_w[m][ch * taps + j]) * raw[m][size_t(p)][size_t(ch)];
        }
        qkv[m][size_t(ch)] = s * sigmoid(s);
      }
    }
    const std::vector<double> f = project(w.f_b, project(w.f_a, xt.data()).data());     // [H*K]
    const std::vector<double> b = project(w.b_proj, xt.data());                         // [H]
    const std::vector<double> gate = project(w.g_b, project(w.g_a, xt.data()).data());  // [H*V]
    std::vector<double> o(static_cast<size_t>(hk));                                     // [H*V]
    for (int h = 0; h < nh; ++h) {
      double* q = &qkv[0][size_t(h) * kd];
      double* k = &qkv[1][size_t(h) * kd];
      const double* v = &qkv[2][size_t(h) * vd];
      double qq = 0, kk = 0;
      for (int i = 0; i < kd; ++i) {
        qq += q[i] * q[i];
        kk += k[i] * k[i];
      }
      for (int i = 0; i < kd; ++i) {
        q[i] = q[i] / std::sqrt(qq + 1e-6) / std::sqrt(double(kd));
        k[i] = k[i] / std::sqrt(kk + 1e-6);
      }
      const double beta = sigmoid(b[size_t(h)]);
      double* s = &ref.state[size_t(h) * kd * vd];  // [K, V]
      for (int i = 0; i < kd; ++i) {
        const double z =
            std::exp(double(w.a_log[h])) * (f[size_t(h * kd + i)] + double(w.dt_bias[h * kd + i]));
        const double g = double(c.kda.gate_lower_bound) * sigmoid(z);
        for (int j = 0; j < vd; ++j) s[i * vd + j] *= std::exp(g);
      }
      for (int j = 0; j < vd; ++j) {
        double kv = 0;
        for (int i = 0; i < kd; ++i) kv += s[i * vd + j] * k[i];
        for (int i = 0; i < kd; ++i) s[i * vd + j] += beta * k[i] * (v[j] - kv);
      }
      double* oh = &o[size_t(h) * vd];
      double ss = 0;
      for (int j = 0; j < vd; ++j) {
        oh[j] = 0;
        for (int i = 0; i < kd; ++i) oh[j] += s[i * vd + j] * q[i];
        ss += oh[j] * oh[j];
      }
      const double r = 1.0 / std::sqrt(ss / vd + double(c.rms_norm_eps));
      for (int j = 0; j < vd; ++j)
        oh[j] = oh[j] * r * double(w.o_norm[j]) * sigmoid(gate[size_t(h * vd + j)]);
    }
    const std::vector<double> y = project(w.o_proj, o.data());  // [D]
    std::copy(y.begin(), y.end(), &ref.out[size_t(t) * d]);
  }
  return ref;
}

}  // namespace sparkglm::kda_test
