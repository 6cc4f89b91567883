#include "engine/backend/cuda/norms.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;

struct RmsParams {
  const float* x;  // [rows, n]
  const float* w;  // [n] or null
  float* y;        // [rows, n]
  uint16_t* y_bf16;
  int64_t n;
  float eps;
};

// A row of up to kCachedVec * 4 * kThreads values (every MODEL.md width up to 4096) is read once
// into registers with all of a thread's loads (x and w) in flight together: a decode row is one
// block, so load latency, not bandwidth, sets its time. Wider rows take the strided loop.
constexpr int kCachedVec = 4;

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const __grid_constant__ RmsParams p) {
  pdl_trigger();  // a decode GEMV after it may start loading its weights
  __shared__ float scratch[32];
  const float* x = p.x + int64_t(blockIdx.x) * p.n;
  float* y = p.y + int64_t(blockIdx.x) * p.n;
  uint16_t* yb = p.y_bf16 ? p.y_bf16 + int64_t(blockIdx.x) * p.n : nullptr;
  if (p.n % 4 == 0 && p.n <= int64_t(kCachedVec) * 4 * kThreads) {
    const int nv = int(p.n / 4);
    float4 xv[kCachedVec], wv[kCachedVec];
#pragma unroll
    for (int u = 0; u < kCachedVec; ++u) {
      const int i = threadIdx.x + u * kThreads;
      xv[u] = i < nv ? reinterpret_cast<const float4*>(x)[i] : make_float4(0, 0, 0, 0);
      wv[u] = i < nv && p.w ? reinterpret_cast<const float4*>(p.w)[i] : make_float4(1, 1, 1, 1);
    }
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < kCachedVec; ++u) {
      ss = fmaf(xv[u].x, xv[u].x, ss);
      ss = fmaf(xv[u].y, xv[u].y, ss);
      ss = fmaf(xv[u].z, xv[u].z, ss);
      ss = fmaf(xv[u].w, xv[u].w, ss);
    }
    ss = block_sum(ss, scratch);
    const float r = 1.0f / sqrtf(ss / float(p.n) + p.eps);
#pragma unroll
    for (int u = 0; u < kCachedVec; ++u) {
      const int i = threadIdx.x + u * kThreads;
      if (i >= nv) continue;
      const float4 v = make_float4(xv[u].x * r * wv[u].x, xv[u].y * r * wv[u].y,
                                   xv[u].z * r * wv[u].z, xv[u].w * r * wv[u].w);
      reinterpret_cast<float4*>(y)[i] = v;
      if (yb) {
        yb[4 * i] = f32_to_bf16_bits(v.x), yb[4 * i + 1] = f32_to_bf16_bits(v.y);
        yb[4 * i + 2] = f32_to_bf16_bits(v.z), yb[4 * i + 3] = f32_to_bf16_bits(v.w);
      }
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

struct LayerNormParams {
  const float* x;
  const float* w;
  const float* b;
  float* y;
  int64_t n;
  float eps;
};

__global__ void __launch_bounds__(kThreads)
    layer_norm_kernel(const __grid_constant__ LayerNormParams p) {
  __shared__ float scratch[32];
  const float* x = p.x + int64_t(blockIdx.x) * p.n;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) s += x[i];
  const float mean = block_sum(s, scratch) / float(p.n);
  float var = 0.0f;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
    const float d = x[i] - mean;
    var = fmaf(d, d, var);
  }
  const float r = 1.0f / sqrtf(block_sum(var, scratch) / float(p.n) + p.eps);
  float* y = p.y + int64_t(blockIdx.x) * p.n;
  for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x)
    y[i] = (x[i] - mean) * r * p.w[i] + p.b[i];
}

__global__ void cast_kernel(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = f32_to_bf16_bits(src[i]);
}

}  // namespace

void rms_norm_rows(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* y,
                   uint16_t* y_bf16, cudaStream_t stream) {
  if (rows <= 0) return;
  rms_norm_kernel<<<unsigned(rows), kThreads, 0, stream>>>(RmsParams{x, w, y, y_bf16, n, eps});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void layer_norm_rows(const float* x, const float* w, const float* b, float eps, int64_t rows,
                     int64_t n, float* y, cudaStream_t stream) {
  if (rows <= 0) return;
  layer_norm_kernel<<<unsigned(rows), kThreads, 0, stream>>>(LayerNormParams{x, w, b, y, n, eps});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void cast_f32_to_bf16(const float* src, int64_t n, uint16_t* dst, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  cast_kernel<<<unsigned(blocks < 16384 ? blocks : 16384), kThreads, 0, stream>>>(src, n, dst);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
