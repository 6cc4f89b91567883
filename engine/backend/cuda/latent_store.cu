#include "engine/backend/cuda/latent_store.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
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

// Grid: rows; block: one warp per group of 128 values (lane takes values lane, lane+32, ...).
// The group's amax ignores NaN as std::max(amax, |v|) does (fmaxf drops a NaN operand), and a
// maximum does not depend on the order it is taken in.
__global__ void store_fp8_kernel(const float* latents, int r, const int32_t* page_rows,
                                 uint8_t* pages) {
  const int g = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t rec_bytes = r + 4 * (r / kGroup);
  const float* v = latents + int64_t(blockIdx.x) * r + g * kGroup;
  uint8_t* rec = pages + int64_t(page_rows[blockIdx.x]) * rec_bytes;
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

// Grid: rows; block: 128 threads, two values each per step.
__global__ void store_bf16_kernel(const float* latents, int r, const int32_t* page_rows,
                                  uint8_t* pages) {
  pdl_wait();  // the latents of the kernel ahead
  pdl_trigger();
  const float* v = latents + int64_t(blockIdx.x) * r;
  uint32_t* rec = reinterpret_cast<uint32_t*>(pages + int64_t(page_rows[blockIdx.x]) * r * 2);
  for (int i = threadIdx.x; i < r / 2; i += blockDim.x)
    rec[i] =
        uint32_t(f32_to_bf16_bits(v[2 * i])) | (uint32_t(f32_to_bf16_bits(v[2 * i + 1])) << 16);
}

// Grid: rows; block: 128 threads over the d_i values.
__global__ void store_keys_kernel(const float* keys, const float* gates, int d_i,
                                  const int32_t* page_rows, float* key_pages, float* gate_pages) {
  pdl_wait();  // the keys and gates of the kernels ahead
  pdl_trigger();
  const int64_t dst = page_rows[blockIdx.x];
  for (int i = threadIdx.x; i < d_i; i += blockDim.x)
    key_pages[dst * d_i + i] = keys[int64_t(blockIdx.x) * d_i + i];
  if (threadIdx.x == 0) gate_pages[dst] = gates[blockIdx.x];
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

}  // namespace sparkglm::cuda
