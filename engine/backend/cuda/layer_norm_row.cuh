#pragma once
// One row's LayerNorm as layer_norm_kernel computes it (norms.cu), for the kernels that take it
// with other work (the MLA step's cache rows in latent_store.cu): the same loops, so the same bits.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/device_math.cuh"

namespace sparkglm::cuda::layer_norm_row {

// y = (x - mean) * rsqrt(var + eps) * w + b (population variance), row by row.
struct Params {
  const float* x;  // [rows, n]
  const float* w;
  const float* b;
  float* y;  // [rows, n], may alias x
  int64_t n;
  float eps;
};

// Row `row` of p by one block (its width sets the order of the sums: norms.cu launches 256).
__device__ __forceinline__ void norm(const Params& p, int64_t row, float* scratch) {
  const float* x = p.x + row * p.n;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) s += x[i];
  const float mean = block_sum(s, scratch) / float(p.n);
  float var = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
    const float d = x[i] - mean;
    var = fmaf(d, d, var);
  }
  const float r = 1.0f / sqrtf(block_sum(var, scratch) / float(p.n) + p.eps);
  float* y = p.y + row * p.n;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x)
    y[i] = (x[i] - mean) * r * p.w[i] + p.b[i];
}

}  // namespace sparkglm::cuda::layer_norm_row
