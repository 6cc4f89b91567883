#pragma once
// Test support for mla_layer_test.cpp: random MLA weights built in memory, and an FP64 reference of
// MODEL.md section 4 written independently of the engine: the un-absorbed form (explicit
// k_h = W_kb,h c_j and v_h = W_vb,h c_j), its own pooled keys, scores and top-pool choice.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sparkglm::testing {

// MlaWeights over storage owned here. Projections have variance 1/fan_in so activations stay of
// order one; norm weights sit near 1 and biases near 0 so that both visibly matter.
class RandomMlaWeights {
 public:
  RandomMlaWeights(const ModelConfig& c, DType dtype, uint32_t seed) : dtype_(dtype), rng_(seed) {
    const int64_t D = c.hidden_size, H = c.num_attention_heads, dn = c.qk_nope_head_dim;
    const int64_t dv = c.v_head_dim, R = c.kv_lora_rank, Q = c.q_lora_rank;
    const int64_t I = c.index_n_heads, di = c.index_head_dim;
    w.q_a = projection(Q, D);                              // [q_lora, D]
    w.q_a_norm = vec(Q, 1.0f, 0.1f);                       // [q_lora]
    w.q_b = projection(H * dn, Q);                         // [H*dn, q_lora]
    w.kv_a = projection(R, D);                             // [R, D]
    w.kv_a_norm = vec(R, 1.0f, 0.1f);                      // [R]
    w.kv_b = projection(H * (dn + dv), R);                 // [H*(dn+dv), R]
    w.o_proj = projection(D, H * dv);                      // [D, H*dv]
    w.indexer.wq_b = projection(I * di, Q);                // [I*d_i, q_lora]
    w.indexer.wk = projection(di, D);                      // [d_i, D]
    w.indexer.k_norm_weight = vec(di, 1.0f, 0.1f);         // [d_i]
    w.indexer.k_norm_bias = vec(di, 0.0f, 0.1f);           // [d_i]
    w.indexer.weights_proj = projection(I, D);             // [I, D]
    w.indexer.kpool_gate = projection(1, D);               // [1, D]
    w.indexer.kpool_ape = vec(c.index_kpool, 0.0f, 0.5f);  // [kpool]
  }
  RandomMlaWeights(const RandomMlaWeights&) = delete;
  RandomMlaWeights& operator=(const RandomMlaWeights&) = delete;

  MlaWeights w;

 private:
  Linear projection(int64_t rows, int64_t cols) {
    std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(float(cols)));
    Linear l{dtype_, rows, cols, nullptr};
    if (dtype_ == DType::kBF16) {
      auto& v = bf16_.emplace_back(size_t(rows * cols));
      for (auto& e : v) e = f32_to_bf16(dist(rng_));
      l.data = v.data();
    } else {
      auto& v = f32_.emplace_back(size_t(rows * cols));
      for (auto& e : v) e = dist(rng_);
      l.data = v.data();
    }
    return l;
  }
  const float* vec(int64_t n, float mean, float stddev) {
    std::normal_distribution<float> dist(mean, stddev);
    auto& v = f32_.emplace_back(size_t(n));
    for (auto& e : v) e = dist(rng_);
    return v.data();
  }

  DType dtype_;
  std::mt19937 rng_;
  // Moving an inner vector when the outer one grows keeps its buffer, so pointers stay valid.
  std::vector<std::vector<float>> f32_;
  std::vector<std::vector<uint16_t>> bf16_;
};

// The reference's result for one sequence computed from position 0.
struct MlaReference {
  std::vector<double> out;                     // [n, D]
  std::vector<std::vector<int32_t>> attended;  // per row, ascending positions
  // Over rows that chose pools: how far the choice is from flipping. That is the score gap between
  // the last chosen and the first rejected pool; when they tie exactly (all heads' ReLU at zero),
  // the smallest |q_h . K_p| among the tied pools, since only a sign flip could break the tie. A
  // margin near FP32 rounding would let the engine legitimately choose differently.
  double min_selection_margin = INFINITY;
  int sparse_rows = 0;
};

namespace detail {

inline std::vector<double> matvec(const Linear& w, int64_t r0, int64_t rows, const double* v) {
  std::vector<double> y(size_t(rows), 0.0);  // [rows]
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < w.cols; ++k) y[size_t(r)] += double(w.at(r0 + r, k)) * v[k];
  return y;
}

inline std::vector<double> rms_norm(std::vector<double> x, const float* w, double eps) {
  double ss = 0.0;
  for (double e : x) ss += e * e;
  const double r = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] * r * double(w[i]);
  return x;
}

inline std::vector<double> layer_norm(std::vector<double> x, const float* w, const float* b) {
  double mean = 0.0, var = 0.0;
  for (double e : x) mean += e;
  mean /= double(x.size());
  for (double e : x) var += (e - mean) * (e - mean);
  const double r = 1.0 / std::sqrt(var / double(x.size()) + 1e-6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - mean) * r * double(w[i]) + double(b[i]);
  return x;
}

inline double dot(const double* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace detail

// x: [n, D] normalised rows of one sequence at positions 0..n-1. With use_indexer false every row
// attends 0..t (the dense layer).
inline MlaReference mla_reference_fp64(const ModelConfig& c, const MlaWeights& w, const float* x,
                                       int64_t n, bool use_indexer) {
  const int64_t D = c.hidden_size, H = c.num_attention_heads, dn = c.qk_nope_head_dim;
  const int64_t dv = c.v_head_dim, R = c.kv_lora_rank, I = c.index_n_heads, di = c.index_head_dim;
  const int kpool = c.index_kpool, topk = c.index_topk_pools();
  const double eps = c.rms_norm_eps, scale = 1.0 / std::sqrt(double(dn + c.qk_rope_head_dim));

  const size_t rows = size_t(n);
  // Per token j: x_j [D], k_j [H*dn], v_j [H*dv], indexer key [d_i], pooling gate.
  std::vector<std::vector<double>> xs(rows), k(rows), v(rows), key(rows);
  std::vector<double> gate(rows);  // [n]
  for (int64_t j = 0; j < n; ++j) {
    xs[size_t(j)].assign(x + j * D, x + (j + 1) * D);  // [D]
    const double* xj = xs[size_t(j)].data();
    const auto cj = detail::rms_norm(detail::matvec(w.kv_a, 0, R, xj), w.kv_a_norm, eps);  // [R]
    for (int64_t h = 0; h < H; ++h) {  // k[j]: [H*dn], v[j]: [H*dv]
      const auto kh = detail::matvec(w.kv_b, h * (dn + dv), dn, cj.data());
      const auto vh = detail::matvec(w.kv_b, h * (dn + dv) + dn, dv, cj.data());
      k[size_t(j)].insert(k[size_t(j)].end(), kh.begin(), kh.end());
      v[size_t(j)].insert(v[size_t(j)].end(), vh.begin(), vh.end());
    }
    key[size_t(j)] = detail::layer_norm(detail::matvec(w.indexer.wk, 0, di, xj),
                                        w.indexer.k_norm_weight, w.indexer.k_norm_bias);  // [d_i]
    gate[size_t(j)] = detail::matvec(w.indexer.kpool_gate, 0, 1, xj)[0];
  }
  std::vector<std::vector<double>> pooled;  // [pools][d_i]
  for (int64_t p = 0; p < n / kpool; ++p) {
    std::vector<double> a(static_cast<size_t>(kpool)), kp(size_t(di), 0.0);
    double mx = -INFINITY, sum = 0.0;
    for (int i = 0; i < kpool; ++i) {
      a[size_t(i)] = gate[size_t(p * kpool + i)] + double(w.indexer.kpool_ape[i]);
      mx = std::max(mx, a[size_t(i)]);
    }
    for (double& e : a) sum += (e = std::exp(e - mx));
    for (int i = 0; i < kpool; ++i)
      for (int64_t e = 0; e < di; ++e)
        kp[size_t(e)] += a[size_t(i)] / sum * key[size_t(p * kpool + i)][size_t(e)];
    pooled.push_back(kp);
  }

  MlaReference ref;
  ref.out.assign(size_t(n * D), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    const double* xt = xs[size_t(t)].data();
    const auto cq = detail::rms_norm(detail::matvec(w.q_a, 0, w.q_a.rows, xt), w.q_a_norm, eps);
    const auto q = detail::matvec(w.q_b, 0, H * dn, cq.data());  // [H*dn]
    std::vector<int32_t> sel;
    const int64_t P = (t + 1) / kpool;
    if (!use_indexer || P <= topk) {
      for (int64_t j = 0; j <= t; ++j) sel.push_back(int32_t(j));
    } else {
      ++ref.sparse_rows;
      const auto qi = detail::matvec(w.indexer.wq_b, 0, I * di, cq.data());  // [I*d_i]
      const auto wh = detail::matvec(w.indexer.weights_proj, 0, I, xt);      // [I]
      std::vector<std::pair<double, int32_t>> scored;                        // (score, pool)
      std::vector<double> kink(size_t(P), INFINITY);  // [P]: min_h |q_h . K_p|
      for (int64_t p = 0; p < P; ++p) {
        double s = 0.0;
        for (int64_t h = 0; h < I; ++h) {
          const double l = detail::dot(&qi[size_t(h * di)], pooled[size_t(p)].data(), di);
          kink[size_t(p)] = std::min(kink[size_t(p)], std::abs(l));
          s += wh[size_t(h)] * std::max(0.0, l);
        }
        scored.push_back({s / std::sqrt(double(di * I)), int32_t(p)});
      }
      std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
      });
      const double last = scored[size_t(topk - 1)].first, next = scored[size_t(topk)].first;
      double margin = last - next;
      if (margin == 0.0) {
        margin = INFINITY;
        for (const auto& [score, p] : scored)
          if (score == last) margin = std::min(margin, kink[size_t(p)]);
      }
      ref.min_selection_margin = std::min(ref.min_selection_margin, margin);
      std::vector<int32_t> pools;
      for (int i = 0; i < topk; ++i) pools.push_back(scored[size_t(i)].second);
      std::sort(pools.begin(), pools.end());
      for (int32_t p : pools)
        for (int i = 0; i < kpool; ++i) sel.push_back(p * kpool + i);
      for (int64_t j = P * kpool; j <= t; ++j) sel.push_back(int32_t(j));
    }
    std::vector<double> o(size_t(H * dv), 0.0);  // [H*dv]: concat_h o_h
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> s;  // [|sel|]
      double mx = -INFINITY, sum = 0.0;
      for (int32_t j : sel) {
        s.push_back(scale * detail::dot(&q[size_t(h * dn)], &k[size_t(j)][size_t(h * dn)], dn));
        mx = std::max(mx, s.back());
      }
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (size_t i = 0; i < sel.size(); ++i)
        for (int64_t e = 0; e < dv; ++e)
          o[size_t(h * dv + e)] += s[i] / sum * v[size_t(sel[i])][size_t(h * dv + e)];
    }
    const auto y = detail::matvec(w.o_proj, 0, D, o.data());
    std::copy(y.begin(), y.end(), ref.out.begin() + t * D);
    ref.attended.push_back(sel);
  }
  return ref;
}

}  // namespace sparkglm::testing
