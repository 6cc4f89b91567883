#pragma once
// One row's RMS norm as rms_norm_kernel's cached path computes it (norms.cu), for the kernels that
// end in that norm (the MTP input in norms.cu, mHC's pre in mhc.cu): with these pieces they take
// its one order of sums, so their rows carry the bits of the norm launched alone.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/device_math.cuh"

namespace sparkglm::cuda::rms_row {

constexpr int kThreads = 256;  // a row's block

// A row of up to kCachedVec * 4 * kThreads values (every MODEL.md width up to 4096) is read once
// into registers with all of a thread's loads (x and w) in flight together: a decode row is one
// block, so load latency, not bandwidth, sets its time. Wider rows take the strided loop.
constexpr int kCachedVec = 4;

__host__ __device__ inline bool cached_width(int64_t n) {
  return n % 4 == 0 && n <= int64_t(kCachedVec) * 4 * kThreads;
}

// 1 / sqrt(mean(x^2) + eps) of a cached row (thread i holds float4s i, i + kThreads, ...; zeros
// past the row): the one order of sums every cached RMS norm here takes.
__device__ __forceinline__ float rms_scale(const float4 (&xv)[kCachedVec], int64_t n, float eps,
                                           float* scratch) {
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kCachedVec; ++u) {
    ss = fmaf(xv[u].x, xv[u].x, ss);
    ss = fmaf(xv[u].y, xv[u].y, ss);
    ss = fmaf(xv[u].z, xv[u].z, ss);
    ss = fmaf(xv[u].w, xv[u].w, ss);
  }
  ss = block_sum(ss, scratch);
  return 1.0f / sqrtf(ss / float(n) + eps);
}

__device__ __forceinline__ float4 load4_or(const float* p, int i, bool in, float fill) {
  return in && p ? reinterpret_cast<const float4*>(p)[i] : make_float4(fill, fill, fill, fill);
}

// x * r * w, element by element (the normed value of a cached row).
__device__ __forceinline__ float4 scaled(float4 x, float r, float4 w) {
  return make_float4(x.x * r * w.x, x.y * r * w.y, x.z * r * w.z, x.w * r * w.w);
}

__device__ __forceinline__ void store_bf16x4(uint16_t* to, float4 v) {
  to[0] = f32_to_bf16_bits(v.x), to[1] = f32_to_bf16_bits(v.y);
  to[2] = f32_to_bf16_bits(v.z), to[3] = f32_to_bf16_bits(v.w);
}

}  // namespace sparkglm::cuda::rms_row
