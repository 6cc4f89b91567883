#pragma once
// One row's RMS norm as rms_norm_kernel computes it (norms.cu), for the kernels that end in that
// norm (the MTP input in norms.cu, mHC's pre in mhc.cu, the MLA step's cache rows in
// latent_store.cu): with these pieces, or the whole row (`norm`), they take its one order of sums,
// so their rows carry the bits of the norm launched alone.
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

// What rms_norm_kernel normalises: y = x * rsqrt(mean(x^2) + eps) * w, row by row.
struct Params {
  const float* x;  // [rows, n]
  const float* w;  // [n] or null
  float* y;        // [rows, n], may alias x
  uint16_t* y_bf16;
  int64_t n;
  float eps;
  const float* add;  // [rows, n] or null: x + add is normalised and written to sum
  float* sum;        // x's place, with add
};

// Row `row` of p by a block of kThreads: cached rows in registers, wider ones by a strided loop.
__device__ __forceinline__ void norm(const Params& p, int64_t row, float* scratch) {
  const int64_t at = row * p.n;
  const float* x = p.x + at;
  float* y = p.y + at;
  uint16_t* yb = p.y_bf16 ? p.y_bf16 + at : nullptr;
  if (cached_width(p.n)) {
    const int nv = int(p.n / 4);
    float4 xv[kCachedVec], wv[kCachedVec];
#pragma unroll
    for (int u = 0; u < kCachedVec; ++u) {
      const int i = threadIdx.x + u * kThreads;
      xv[u] = load4_or(x, i, i < nv, 0.0f);
      wv[u] = load4_or(p.w, i, i < nv, 1.0f);
      if (p.add && i < nv) {  // the residual add first, in add_in_place's order
        const float4 a = reinterpret_cast<const float4*>(p.add + at)[i];
        xv[u] = make_float4(xv[u].x + a.x, xv[u].y + a.y, xv[u].z + a.z, xv[u].w + a.w);
        reinterpret_cast<float4*>(p.sum + at)[i] = xv[u];
      }
    }
    const float r = rms_scale(xv, p.n, p.eps, scratch);
#pragma unroll
    for (int u = 0; u < kCachedVec; ++u) {
      const int i = threadIdx.x + u * kThreads;
      if (i >= nv) continue;
      const float4 v = scaled(xv[u], r, wv[u]);
      reinterpret_cast<float4*>(y)[i] = v;
      if (yb) store_bf16x4(yb + 4 * i, v);
    }
    return;
  }
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) ss = fmaf(x[i], x[i], ss);
  ss = block_sum(ss, scratch);
  const float r = 1.0f / sqrtf(ss / float(p.n) + p.eps);
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
    float v = x[i] * r;
    if (p.w) v = v * p.w[i];
    y[i] = v;
    if (yb) yb[i] = f32_to_bf16_bits(v);
  }
}

}  // namespace sparkglm::cuda::rms_row
