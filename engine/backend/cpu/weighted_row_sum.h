#pragma once
// out = a b for the MLA layer's small matrix products whose reduction order is part of the
// contract (mla_layer.h): the absorbed queries q~ = W_kb^T q (summed over dn) and the attention
// output ō = p C (summed over attended positions in increasing order).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/core/dtype.h"

namespace sparkglm::cpu {

namespace weighted_row_sum_detail {

inline float to_f32(float v) {
  return v;
}
inline float to_f32(uint16_t v) {
  return bf16_to_f32(v);
}

// kRows x kLanes elements of weighted_row_sum: the accumulators stay in registers while b
// streams past, so each column block of b is read once per row group; the blocking changes no
// element's arithmetic.
template <typename T, int kRows, int kLanes>
void weighted_sum_tile(const float* a, int64_t lda, int64_t n, const T* b, int64_t r, float* out,
                       int64_t ldo) {
  float acc[kRows][kLanes] = {};
  for (int64_t k = 0; k < n; ++k) {
    float bk[kLanes];  // [kLanes] of row k of b
    for (int e = 0; e < kLanes; ++e) bk[e] = to_f32(b[k * r + e]);
    for (int i = 0; i < kRows; ++i) {
      const float ak = a[i * lda + k];
      for (int e = 0; e < kLanes; ++e) acc[i][e] = std::fma(ak, bk[e], acc[i][e]);
    }
  }
  for (int i = 0; i < kRows; ++i) std::copy_n(acc[i], kLanes, out + i * ldo);
}

// Elements [e0, R) of rows [i0, i1), one element at a time.
template <typename T>
void weighted_sum_rest(const float* a, int64_t lda, int64_t i0, int64_t i1, int64_t n, const T* b,
                       int64_t r, int64_t e0, float* out, int64_t ldo) {
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t e = e0; e < r; ++e) {
      float acc = 0.0f;
      for (int64_t k = 0; k < n; ++k) acc = std::fma(a[i * lda + k], to_f32(b[k * r + e]), acc);
      out[i * ldo + e] = acc;
    }
}

}  // namespace weighted_row_sum_detail

// out[i][e] = sum_k a[i][k] * b[k][e] for i < rows, k < n, e < r, summed in increasing k with one
// FMA chain per element, whatever the blocking. a: [rows, n] with row stride lda; b: [n, r]
// contiguous, FP32 or BF16; out: [rows, r] with row stride ldo.
template <typename T>
void weighted_row_sum(const float* a, int64_t lda, int64_t rows, int64_t n, const T* b, int64_t r,
                      float* out, int64_t ldo) {
  using namespace weighted_row_sum_detail;  // NOLINT(google-build-using-namespace): its tiles
  constexpr int kRows = 4, kLanes = 32;     // 8 AVX-512 or 16 AVX2 accumulators
  constexpr int kWideLanes = 128;           // a lone row needs more chains to hide FMA latency
  const int64_t full = rows / kRows * kRows;
  int64_t e0 = 0;
  for (; e0 + kLanes <= r; e0 += kLanes)  // lane blocks outer: b's column block stays in cache
    for (int64_t i = 0; i < full; i += kRows)
      weighted_sum_tile<T, kRows, kLanes>(a + i * lda, lda, n, b + e0, r, out + i * ldo + e0, ldo);
  weighted_sum_rest(a, lda, 0, full, n, b, r, e0, out, ldo);
  int64_t e1 = 0;  // leftover rows, such as a decode step's single query
  for (; e1 + kWideLanes <= r; e1 += kWideLanes)
    for (int64_t i = full; i < rows; ++i)
      weighted_sum_tile<T, 1, kWideLanes>(a + i * lda, lda, n, b + e1, r, out + i * ldo + e1, ldo);
  for (; e1 + kLanes <= r; e1 += kLanes)
    for (int64_t i = full; i < rows; ++i)
      weighted_sum_tile<T, 1, kLanes>(a + i * lda, lda, n, b + e1, r, out + i * ldo + e1, ldo);
  weighted_sum_rest(a, lda, full, rows, n, b, r, e1, out, ldo);
}

}  // namespace sparkglm::cpu
