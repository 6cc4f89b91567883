#pragma once
// Row norms of MODEL.md in FP32 (one block per row, so a row never depends on other rows), and
// the FP32 -> BF16 cast that feeds the projections.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// y = x * rsqrt(mean(x^2) + eps) * w  (w may be null). x, y: [rows, n] FP32, y may alias x;
// y_bf16: [rows, n] BF16 bits of y, or null.
void rms_norm_rows(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* y,
                   uint16_t* y_bf16, cudaStream_t stream);

// y = (x - mean) * rsqrt(var + eps) * w + b (population variance). x, y: [rows, n] FP32.
void layer_norm_rows(const float* x, const float* w, const float* b, float eps, int64_t rows,
                     int64_t n, float* y, cudaStream_t stream);

// dst: [n] BF16 bits, round to nearest even.
void cast_f32_to_bf16(const float* src, int64_t n, uint16_t* dst, cudaStream_t stream);

}  // namespace sparkglm::cuda
