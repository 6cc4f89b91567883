#include "engine/backend/cuda/norms.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/layer_norm_row.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/backend/cuda/rms_row.cuh"
#include "engine/backend/cuda/runner_kernels.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

using rms_row::cached_width;
using rms_row::kCachedVec;
using rms_row::kThreads;
using rms_row::load4_or;
using rms_row::rms_scale;
using rms_row::scaled;
using rms_row::store_bf16x4;

using RmsParams = rms_row::Params;

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const __grid_constant__ RmsParams p) {
  pdl_trigger();  // a decode GEMV after it may start loading its weights
  pdl_wait();     // x (and add) of the kernel ahead
  __shared__ float scratch[32];
  rms_row::norm(p, blockIdx.x, scratch);
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
    store_bf16x4(out + 4 * i, scaled(xv[u], r, wv[u]));
  }
}

using LayerNormParams = layer_norm_row::Params;

__global__ void __launch_bounds__(kThreads)
    layer_norm_kernel(const __grid_constant__ LayerNormParams p) {
  __shared__ float scratch[32];
  pdl_wait();
  pdl_trigger();
  layer_norm_row::norm(p, blockIdx.x, scratch);
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
