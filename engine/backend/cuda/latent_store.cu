#include "engine/backend/cuda/latent_store.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/layer_norm_row.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/backend/cuda/rms_row.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kGroup = 128;  // fp8_g128: values per scale

// core/dtype.cpp's f32_to_e4m3 step for step (NaN -> 0x7f, saturate at 448, round to nearest
// even within the binade, subnormals below 2^-6); every step is exact on the device too.
__device__ __forceinline__ uint8_t f32_to_e4m3_dev(float f) {
  if (isnan(f)) return 0x7f;
  const uint8_t sign = signbit(f) ? 0x80 : 0x00;
  const float a = fabsf(f);
  if (a >= 448.0f) return uint8_t(sign | 0x7e);
  int e;
  frexpf(a, &e);
  const int exp_unbiased = max(e - 1, -6);
  const float quantum = ldexpf(1.0f, exp_unbiased - 3);
  const float q = rintf(a / quantum) * quantum;
  if (q == 0.0f) return sign;
  if (q >= 448.0f) return uint8_t(sign | 0x7e);
  int qe;
  const float qm = frexpf(q, &qe);
  if (qe - 1 < -6) return uint8_t(sign | uint8_t(ldexpf(q, 9)));
  const uint8_t exp_field = uint8_t(qe - 1 + 7);
  const uint8_t man_field = uint8_t(rintf((qm * 2.0f - 1.0f) * 8.0f));
  return uint8_t(sign | (exp_field << 3) | man_field);
}

// Group g of a row's fp8_g128 record by one warp (lane takes values lane, lane+32, ...). The
// group's amax ignores NaN as std::max(amax, |v|) does (fmaxf drops a NaN operand), and a maximum
// does not depend on the order it is taken in.
__device__ __forceinline__ void store_fp8_group(const float* row, int r, int g, uint8_t* rec) {
  const int lane = threadIdx.x & 31;
  const float* v = row + g * kGroup;
  float x[kGroup / 32];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kGroup / 32; ++i) {
    x[i] = v[lane + 32 * i];
    amax = fmaxf(amax, fabsf(x[i]));
  }
  amax = warp_max(amax);
  const float scale = amax / 448.0f;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
#pragma unroll
  for (int i = 0; i < kGroup / 32; ++i)
    rec[g * kGroup + lane + 32 * i] = f32_to_e4m3_dev(__fmul_rn(x[i], inv));
  if (lane < 4) rec[r + 4 * g + lane] = uint8_t(__float_as_uint(scale) >> (8 * lane));
}

// A row's bf16 record: two values a thread per step over the block.
__device__ __forceinline__ void store_bf16_row(const float* v, int r, uint8_t* record) {
  uint32_t* rec = reinterpret_cast<uint32_t*>(record);
  for (int i = threadIdx.x; i < r / 2; i += blockDim.x)
    rec[i] =
        uint32_t(f32_to_bf16_bits(v[2 * i])) | (uint32_t(f32_to_bf16_bits(v[2 * i + 1])) << 16);
}

// A row's indexer key and gate into their page entry `dst`.
__device__ __forceinline__ void store_key_row(const float* key, float gate, int d_i, int64_t dst,
                                              float* key_pages, float* gate_pages) {
  for (int i = threadIdx.x; i < d_i; i += blockDim.x) key_pages[dst * d_i + i] = key[i];
  if (threadIdx.x == 0) gate_pages[dst] = gate;
}

// Grid: rows; block: one warp per group of 128 values.
__global__ void store_fp8_kernel(const float* latents, int r, const int32_t* page_rows,
                                 uint8_t* pages) {
  store_fp8_group(latents + int64_t(blockIdx.x) * r, r, int(threadIdx.x >> 5),
                  pages + page_rows[blockIdx.x] * latent_record_bytes(LatentFormat::kFp8G128, r));
}

// Grid: rows; block: 128 threads, two values each per step.
__global__ void store_bf16_kernel(const float* latents, int r, const int32_t* page_rows,
                                  uint8_t* pages) {
  pdl_wait();  // the latents of the kernel ahead
  pdl_trigger();
  store_bf16_row(latents + int64_t(blockIdx.x) * r, r,
                 pages + page_rows[blockIdx.x] * latent_record_bytes(LatentFormat::kBF16, r));
}

// Grid: rows; block: 128 threads over the d_i values.
__global__ void store_keys_kernel(const float* keys, const float* gates, int d_i,
                                  const int32_t* page_rows, float* key_pages, float* gate_pages) {
  pdl_wait();  // the keys and gates of the kernels ahead
  pdl_trigger();
  store_key_row(keys + int64_t(blockIdx.x) * d_i, gates[blockIdx.x], d_i, page_rows[blockIdx.x],
                key_pages, gate_pages);
}

// Grid: (rows, 3), rms_row::kThreads threads. Part 0 normalises the row's latent in place and
// stores it, part 1 normalises its indexer key in place and stores it with its gate, part 2
// normalises its query latent: each norm by the body its own kernel runs (norms.cu), each store by
// the body of store_latents' and store_index_keys' kernels, reading back what the block wrote.
__global__ void __launch_bounds__(rms_row::kThreads)
    mla_rows_kernel(const __grid_constant__ MlaCacheRows a) {
  pdl_trigger();  // the pools after it may be scheduled
  pdl_wait();     // the projections of the kernel ahead
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t dst = a.page_rows[row];
  if (blockIdx.y == 0) {
    rms_row::norm({a.latent, a.latent_norm, a.latent, nullptr, a.R, a.eps, nullptr, nullptr}, row,
                  scratch);
    __syncthreads();  // the block's normed latent, read back by other threads
    const float* v = a.latent + row * a.R;
    uint8_t* rec = a.latent_pages + dst * latent_record_bytes(a.format, a.R);
    if (a.format == LatentFormat::kFp8G128) {
      for (int g = int(threadIdx.x >> 5); g < a.R / kGroup; g += int(blockDim.x >> 5))
        store_fp8_group(v, a.R, g, rec);
    } else {
      store_bf16_row(v, a.R, rec);
    }
  } else if (blockIdx.y == 1) {
    layer_norm_row::norm({a.keys, a.key_norm_w, a.key_norm_b, a.keys, a.d_i, a.key_eps}, row,
                         scratch);
    __syncthreads();
    store_key_row(a.keys + row * a.d_i, a.gates[row], a.d_i, dst, a.key_pages, a.gate_pages);
  } else {
    rms_row::norm({a.cq, a.cq_norm, a.cq, a.cq_bf16, a.ql, a.eps, nullptr, nullptr}, row, scratch);
  }
}

}  // namespace

void store_latents(const float* latents, int64_t rows, int R, LatentFormat format,
                   const int32_t* page_rows, uint8_t* pages, cudaStream_t stream) {
  SPARKGLM_ASSERT(rows <= int64_t(INT32_MAX), "store_latents: too many rows");
  if (rows <= 0) return;
  if (format == LatentFormat::kFp8G128) {
    SPARKGLM_ASSERT(R > 0 && R % kGroup == 0 && R <= 32 * kGroup,
                    "store_latents: fp8_g128 needs R a multiple of 128, at most 4096");
    store_fp8_kernel<<<unsigned(rows), unsigned(R / kGroup * 32), 0, stream>>>(latents, R,
                                                                               page_rows, pages);
  } else {
    SPARKGLM_ASSERT(R > 0 && R % 2 == 0 && reinterpret_cast<uintptr_t>(pages) % 4 == 0,
                    "store_latents: bf16 needs an even R and 4-byte aligned pages");
    launch_dependent(store_bf16_kernel, unsigned(rows), 128, 0, stream, latents, R, page_rows,
                     pages);
  }
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void store_index_keys(const float* keys, const float* gates, int64_t rows, int d_i,
                      const int32_t* page_rows, float* key_pages, float* gate_pages,
                      cudaStream_t stream) {
  SPARKGLM_ASSERT(rows <= int64_t(INT32_MAX) && d_i > 0, "store_index_keys: bad shape");
  if (rows <= 0) return;
  launch_dependent(store_keys_kernel, unsigned(rows), 128, 0, stream, keys, gates, d_i, page_rows,
                   key_pages, gate_pages);
}

void store_mla_rows(const MlaCacheRows& a, int64_t rows, cudaStream_t stream) {
  SPARKGLM_ASSERT(rows <= int64_t(INT32_MAX), "store_mla_rows: too many rows");
  if (rows <= 0) return;
  SPARKGLM_ASSERT(a.R > 0 && a.R % 2 == 0 && a.R <= 32 * kGroup && a.d_i > 0 && a.ql > 0,
                  "store_mla_rows: the latent, key and query widths");
  SPARKGLM_ASSERT(a.format != LatentFormat::kFp8G128 || a.R % kGroup == 0,
                  "store_mla_rows: fp8_g128 needs R a multiple of 128");
  SPARKGLM_ASSERT(reinterpret_cast<uintptr_t>(a.latent_pages) % 4 == 0,
                  "store_mla_rows: 4-byte aligned pages");
  launch_dependent(mla_rows_kernel, dim3(unsigned(rows), 3), rms_row::kThreads, 0, stream, a);
}

}  // namespace sparkglm::cuda
