#include "engine/backend/cpu/hyper_connections.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"

namespace sparkglm::cpu {

namespace {

// mixes: [T, M] = (fn [M, N] . v) * rsqrt(mean(v^2) + eps) for every row v of X [T, N].
// Parallel over (row, mix) pairs so that a single decode row still uses every thread.
void compute_mixes(const float* fn, int64_t M, const float* X, int64_t T, int64_t N, float eps,
                   float* mixes, ThreadPool& pool) {
  std::vector<float> rs(static_cast<size_t>(T));  // [T]
  pool.parallel_for(T, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const float* v = X + t * N;
      rs[size_t(t)] = 1.0f / std::sqrt(dot(v, v, N) / float(N) + eps);
    }
  });
  pool.parallel_for(T * M, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t t = i / M, j = i % M;
      mixes[i] = dot(fn + j * N, X + t * N, N) * rs[size_t(t)];
    }
  });
}

// y [D] = sum_s pre[s] * X[s] over the hc streams of one row x [hc, D].
void weighted_stream_sum(const float* pre, const float* x, int hc, int64_t D, float* y) {
  for (int64_t d = 0; d < D; ++d) {
    float acc = 0.0f;
    for (int s = 0; s < hc; ++s) acc += pre[s] * x[s * D + d];
    y[d] = acc;
  }
}

// comb [hc, hc] from its logits, in place: softmax along s', + eps, then Sinkhorn.
void sinkhorn(float* m, int hc, int iters, float eps) {
  for (int s = 0; s < hc; ++s) {
    softmax(m + s * hc, hc);
    for (int j = 0; j < hc; ++j) m[s * hc + j] += eps;
  }
  auto normalize_columns = [&] {
    for (int j = 0; j < hc; ++j) {
      float sum = 0.0f;
      for (int s = 0; s < hc; ++s) sum += m[s * hc + j];
      const float den = sum + eps;
      for (int s = 0; s < hc; ++s) m[s * hc + j] /= den;
    }
  };
  normalize_columns();
  for (int it = 1; it < iters; ++it) {
    for (int s = 0; s < hc; ++s) {
      float sum = 0.0f;
      for (int j = 0; j < hc; ++j) sum += m[s * hc + j];
      const float den = sum + eps;
      for (int j = 0; j < hc; ++j) m[s * hc + j] /= den;
    }
    normalize_columns();
  }
}

}  // namespace

void hc_pre(const ModelConfig& c, const HcSite& w, const float* X, int64_t T, float* y, float* post,
            float* comb, ThreadPool& pool) {
  const int hc = c.hc_mult;
  const int64_t D = c.hidden_size;
  const int64_t N = c.hc_dim();
  const int64_t M = c.hc_mix_count();  // hc pre + hc post + hc*hc comb
  const float eps = c.hc_eps;
  std::vector<float> mixes(size_t(T * M));  // [T, M]
  compute_mixes(w.fn, M, X, T, N, c.rms_norm_eps, mixes.data(), pool);

  pool.parallel_for(T, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> pre(static_cast<size_t>(hc));  // [hc]
    for (int64_t t = lo; t < hi; ++t) {
      const float* mx = mixes.data() + t * M;
      for (int s = 0; s < hc; ++s) pre[size_t(s)] = sigmoid(mx[s] * w.scale[0] + w.base[s]) + eps;
      for (int s = 0; s < hc; ++s)
        post[t * hc + s] = 2.0f * sigmoid(mx[hc + s] * w.scale[1] + w.base[hc + s]);
      float* cm = comb + t * hc * hc;
      for (int i = 0; i < hc * hc; ++i) cm[i] = mx[2 * hc + i] * w.scale[2] + w.base[2 * hc + i];
      sinkhorn(cm, hc, c.hc_sinkhorn_iters, eps);
      weighted_stream_sum(pre.data(), X + t * N, hc, D, y + t * D);
    }
  });
}

void hc_post(const ModelConfig& c, float* X, const float* b, const float* post, const float* comb,
             int64_t T, ThreadPool& pool) {
  const int hc = c.hc_mult;
  const int64_t D = c.hidden_size;
  const int64_t N = c.hc_dim();
  // Split rows x width so that one decode row still uses every thread; each column d of a row is
  // independent, which is what makes the in-place update safe.
  constexpr int64_t kCols = 512;
  const int64_t blocks = (D + kCols - 1) / kCols;
  pool.parallel_for(T * blocks, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> old(static_cast<size_t>(hc));  // [hc] X[:, d] before the update
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t t = i / blocks;
      const int64_t d0 = (i % blocks) * kCols, d1 = std::min(D, d0 + kCols);
      float* x = X + t * N;
      const float* p = post + t * hc;
      const float* cm = comb + t * hc * hc;
      for (int64_t d = d0; d < d1; ++d) {
        for (int s = 0; s < hc; ++s) old[size_t(s)] = x[s * D + d];
        for (int s = 0; s < hc; ++s) {
          float acc = 0.0f;
          for (int j = 0; j < hc; ++j) acc += cm[s * hc + j] * old[size_t(j)];
          x[s * D + d] = p[s] * b[t * D + d] + acc;
        }
      }
    }
  });
}

void hc_head(const ModelConfig& c, const HcHead& w, const float* X, int64_t T, float* h,
             ThreadPool& pool) {
  const int hc = c.hc_mult;
  const int64_t D = c.hidden_size;
  const int64_t N = c.hc_dim();
  std::vector<float> mixes(size_t(T * hc));  // [T, hc]
  compute_mixes(w.fn, hc, X, T, N, c.rms_norm_eps, mixes.data(), pool);
  pool.parallel_for(T, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> pre(static_cast<size_t>(hc));  // [hc]
    for (int64_t t = lo; t < hi; ++t) {
      for (int s = 0; s < hc; ++s)
        pre[size_t(s)] = sigmoid(mixes[size_t(t * hc + s)] * w.scale[0] + w.base[s]) + c.hc_eps;
      weighted_stream_sum(pre.data(), X + t * N, hc, D, h + t * D);
    }
  });
}

}  // namespace sparkglm::cpu
