#pragma once
// Device pieces shared by the decode MoE kernels over BF16 experts (moe_experts.cu) and over
// quantized experts (moe_quant_experts.cu): the group layout, the clamped SwiGLU, and the
// fixed-order sum of the split-k warps' MMA fragments.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/moe_experts.h"

namespace sparkglm::cuda::moe_decode {

constexpr int kSplitK = 4;  // warps per block, each a contiguous quarter of k
constexpr int kRows = 16;   // W rows per block (the MMA's 16 rows)

constexpr int kGroup = 8;               // pairs per group: the MMA's 8 columns
constexpr int kGroupInts = 1 + kGroup;  // expert, then its pairs (-1: an empty column)

__device__ __forceinline__ float swiglu(float gv, float uv, float limit) {
  if (limit > 0.0f) {  // std::min / std::clamp's comparisons: a NaN passes through
    gv = limit < gv ? limit : gv;
    uv = uv < -limit ? -limit : (limit < uv ? limit : uv);
  }
  return gv / (1.0f + expf(-gv)) * uv;
}

// Sums the kSplitK warps' fragments in warp order into warp 0's acc (rows g and g + 8 of this
// lane, columns 2t and 2t + 1); true in warp 0.
__device__ __forceinline__ bool reduce_warps(float (*partial)[32][4], float* acc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp > 0)
    for (int i = 0; i < 4; ++i) partial[warp - 1][lane][i] = acc[i];
  __syncthreads();
  if (warp != 0) return false;
#pragma unroll
  for (int w = 0; w < kSplitK - 1; ++w)
    for (int i = 0; i < 4; ++i) acc[i] = acc[i] + partial[w][lane][i];
  return true;
}

// The group of this block (blockIdx.y) or null past the count; this lane's column's pair (-1:
// none) in *pair.
__device__ __forceinline__ const int32_t* block_group(const MoeExpertArgs& a, int* pair) {
  if (int(blockIdx.y) >= a.groups[0]) return nullptr;
  const int32_t* grp = a.groups + 1 + int64_t(blockIdx.y) * kGroupInts;
  *pair = grp[1 + ((threadIdx.x & 31) >> 2)];
  return grp;
}

}  // namespace sparkglm::cuda::moe_decode
