#include "engine/backend/cuda/sampling.h"

#include "engine/backend/cuda/cuda_check.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ void take(float v, int64_t i, float& bv, int64_t& bi) {
  if (i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi))) bv = v, bi = i;
}

// Grid: rows. Each thread scans a strided slice with float4 loads, then (value, id) reductions.
__global__ void __launch_bounds__(kThreads)
    greedy_kernel(const float* logits, int64_t vocab, int32_t* tokens) {
  __shared__ float sv[kThreads / 32];
  __shared__ int64_t si[kThreads / 32];
  const float* x = logits + int64_t(blockIdx.x) * vocab;
  float bv = -INFINITY;
  int64_t bi = -1;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = x[i];
    if (!isnan(v) && v > -INFINITY) take(v, i, bv, bi);
  }
  for (int m = 16; m > 0; m >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, m);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, m);
    take(ov, oi, bv, bi);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) take(sv[w], si[w], bv, bi);
    tokens[blockIdx.x] = int32_t(bi);
  }
}

}  // namespace

void sample_greedy(const float* logits, int64_t rows, int64_t vocab, int32_t* tokens,
                   cudaStream_t stream) {
  if (rows <= 0) return;
  greedy_kernel<<<unsigned(rows), kThreads, 0, stream>>>(logits, vocab, tokens);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
