#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "tinyglm/dummy_hash.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;

// Round to nearest even, NaN kept quiet: the same integer steps as f32_to_bf16 in core/dtype.h.
__device__ uint16_t to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

struct FillParams {
  int64_t n;
  uint64_t key;
  float center;
  float half_width;
};

__global__ void fill_bf16_kernel(uint16_t* dst, const __grid_constant__ FillParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = to_bf16(dummy::value(p.key, uint64_t(i), p.center, p.half_width));
}

__global__ void fill_f32_kernel(float* dst, const __grid_constant__ FillParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = dummy::value(p.key, uint64_t(i), p.center, p.half_width);
}

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return int(blocks < 65536 ? blocks : 65536);
}

}  // namespace

void fill_dummy_bf16(uint16_t* dst, int64_t n, uint64_t key, float center, float half_width,
                     cudaStream_t stream) {
  if (n <= 0) return;
  fill_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst,
                                                         FillParams{n, key, center, half_width});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void fill_dummy_f32(float* dst, int64_t n, uint64_t key, float center, float half_width,
                    cudaStream_t stream) {
  if (n <= 0) return;
  fill_f32_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst,
                                                        FillParams{n, key, center, half_width});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
