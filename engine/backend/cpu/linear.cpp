#include "engine/backend/cpu/linear.h"

#include <cmath>

namespace sparkglm::cpu {

namespace {

inline float reduce_lanes(const float* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

template <typename LoadW>
float dot_lanes(const float* x, LoadW w, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < n; ++k) acc[k & 7] = std::fma(x[k], w(k), acc[k & 7]);
  return reduce_lanes(acc);
}

float row_dot(const float* x, const Linear& w, int64_t n) {
  if (w.dtype == DType::kBF16) {
    const uint16_t* row = w.bf16() + n * w.cols;
    return dot_lanes(x, [row](int64_t k) { return bf16_to_f32(row[k]); }, w.cols);
  }
  const float* row = w.f32() + n * w.cols;
  return dot_lanes(x, [row](int64_t k) { return row[k]; }, w.cols);
}

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
  return dot_lanes(a, [b](int64_t k) { return b[k]; }, n);
}

void linear_slice(const float* x, int64_t ldx, int64_t m, const Linear& w, int64_t n0, int64_t n1,
                  float* y, int64_t ldy, ThreadPool& pool) {
  pool.parallel_for(n1 - n0, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t n = n0 + lo; n < n0 + hi; ++n)
      for (int64_t r = 0; r < m; ++r) y[r * ldy + (n - n0)] = row_dot(x + r * ldx, w, n);
  });
}

void linear(const float* x, int64_t ldx, int64_t m, const Linear& w, float* y, int64_t ldy,
            ThreadPool& pool) {
  linear_slice(x, ldx, m, w, 0, w.rows, y, ldy, pool);
}

}  // namespace sparkglm::cpu
