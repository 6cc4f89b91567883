#include "engine/backend/cuda/norms.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/backend/cuda/runner_kernels.h"
#include "engine/core/error.h"

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
  const float* add;  // [rows, n] or null: x + add is normalised and written to sum
  float* sum;        // x's place, with add
};

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

__device__ __forceinline__ void store_bf16x4(uint16_t* to, float4 v) {
  to[0] = f32_to_bf16_bits(v.x), to[1] = f32_to_bf16_bits(v.y);
  to[2] = f32_to_bf16_bits(v.z), to[3] = f32_to_bf16_bits(v.w);
}

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const __grid_constant__ RmsParams p) {
  pdl_trigger();  // a decode GEMV after it may start loading its weights
  pdl_wait();     // x (and add) of the kernel ahead
  __shared__ float scratch[32];
  const int64_t at = int64_t(blockIdx.x) * p.n;
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
      const float4 v = make_float4(xv[u].x * r * wv[u].x, xv[u].y * r * wv[u].y,
                                   xv[u].z * r * wv[u].z, xv[u].w * r * wv[u].w);
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

struct MtpEntryParams {
  const uint16_t* table;  // [vocab, n] BF16
  int64_t vocab;
  const int32_t* ids;  // [rows]
  const float* e_norm;
  const float* h;  // [rows, n]
  const float* h_norm;
  uint16_t* cat;  // [rows, 2n]
  int64_t n;
  float eps;
};

// Grid: (rows, 2); part 0 normalises the token's embedding row, part 1 the hidden state, each as
// rms_norm_kernel's cached path does, into its half of the row's BF16 concatenation.
__global__ void __launch_bounds__(kThreads)
    mtp_entry_kernel(const __grid_constant__ MtpEntryParams p) {
  pdl_trigger();  // eh_proj after it may start loading its weights
  pdl_wait();     // the ids and h of the kernels ahead
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int part = int(blockIdx.y);
  const int nv = int(p.n / 4);
  const int32_t id = p.ids[row];
  const bool valid = id >= 0 && id < p.vocab;  // else NaN, as embed_tokens writes
  const float* w = part == 0 ? p.e_norm : p.h_norm;
  float4 xv[kCachedVec], wv[kCachedVec];
#pragma unroll
  for (int u = 0; u < kCachedVec; ++u) {
    const int i = threadIdx.x + u * kThreads;
    wv[u] = load4_or(w, i, i < nv, 1.0f);
    if (part == 1) {
      xv[u] = load4_or(p.h + row * p.n, i, i < nv, 0.0f);
    } else if (i >= nv) {
      xv[u] = make_float4(0, 0, 0, 0);
    } else if (!valid) {
      const float nan = __int_as_float(0x7fc00000);
      xv[u] = make_float4(nan, nan, nan, nan);
    } else {
      const uint2 b = reinterpret_cast<const uint2*>(p.table + int64_t(id) * p.n)[i];
      xv[u] = make_float4(bf16_bits_to_f32(uint16_t(b.x)), bf16_bits_to_f32(uint16_t(b.x >> 16)),
                          bf16_bits_to_f32(uint16_t(b.y)), bf16_bits_to_f32(uint16_t(b.y >> 16)));
    }
  }
  const float r = rms_scale(xv, p.n, p.eps, scratch);
  uint16_t* out = p.cat + row * 2 * p.n + part * p.n;
#pragma unroll
  for (int u = 0; u < kCachedVec; ++u) {
    const int i = threadIdx.x + u * kThreads;
    if (i >= nv) continue;
    store_bf16x4(out + 4 * i, make_float4(xv[u].x * r * wv[u].x, xv[u].y * r * wv[u].y,
                                          xv[u].z * r * wv[u].z, xv[u].w * r * wv[u].w));
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
  pdl_wait();
  pdl_trigger();
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
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = f32_to_bf16_bits(src[i]);
}

}  // namespace

void rms_norm_rows(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* y,
                   uint16_t* y_bf16, cudaStream_t stream) {
  if (rows <= 0) return;
  launch_dependent(rms_norm_kernel, unsigned(rows), kThreads, 0, stream,
                   RmsParams{x, w, y, y_bf16, n, eps, nullptr, nullptr});
}

void add_rms_norm_rows(float* x, const float* add, const float* w, float eps, int64_t rows,
                       int64_t n, float* y, uint16_t* y_bf16, cudaStream_t stream) {
  if (rows <= 0) return;
  if (!cached_width(n)) {  // wider rows: the two launches
    add_in_place(x, add, rows * n, stream);
    rms_norm_rows(x, w, eps, rows, n, y, y_bf16, stream);
    return;
  }
  launch_dependent(rms_norm_kernel, unsigned(rows), kThreads, 0, stream,
                   RmsParams{x, w, y, y_bf16, n, eps, add, x});
}

bool mtp_entry_fits(int64_t n) {
  return cached_width(n);
}

void mtp_entry_bf16(const uint16_t* table, int64_t vocab, const int32_t* ids, const float* e_norm,
                    const float* h, const float* h_norm, float eps, int64_t rows, int64_t n,
                    uint16_t* cat, cudaStream_t stream) {
  SPARKGLM_ASSERT(mtp_entry_fits(n), "mtp_entry_bf16: a row wider than the cached norm's");
  if (rows <= 0) return;
  launch_dependent(mtp_entry_kernel, dim3(unsigned(rows), 2), kThreads, 0, stream,
                   MtpEntryParams{table, vocab, ids, e_norm, h, h_norm, cat, n, eps});
}

void layer_norm_rows(const float* x, const float* w, const float* b, float eps, int64_t rows,
                     int64_t n, float* y, cudaStream_t stream) {
  if (rows <= 0) return;
  launch_dependent(layer_norm_kernel, unsigned(rows), kThreads, 0, stream,
                   LayerNormParams{x, w, b, y, n, eps});
}

void cast_f32_to_bf16(const float* src, int64_t n, uint16_t* dst, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  launch_dependent(cast_kernel, unsigned(blocks < 16384 ? blocks : 16384), kThreads, 0, stream, src,
                   n, dst);
}

}  // namespace sparkglm::cuda
