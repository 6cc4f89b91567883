#include "engine/backend/cuda/moe_router.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;

struct RouterParams {
  const float* logits;
  const float* bias;
  int32_t* experts_out;
  float* weights_out;
  int experts, top_k;
  bool norm;
  float scale;
};

// (key, index) ordering of the tie rule: a larger key wins; equal keys go to the lower index.
__device__ __forceinline__ bool better(float ka, int ia, float kb, int ib) {
  return ka > kb || (ka == kb && ia < ib);
}

// Grid: rows. Each round takes the best remaining expert by a block-wide (key, index) reduction.
__global__ void __launch_bounds__(kThreads) router_kernel(const __grid_constant__ RouterParams p) {
  __shared__ float key[kRouterMaxExperts];
  __shared__ float score[kRouterMaxExperts];
  __shared__ float red_key[kThreads / 32];
  __shared__ int red_idx[kThreads / 32];
  __shared__ int chosen[kRouterMaxTopK];
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int e = threadIdx.x; e < p.experts; e += blockDim.x) {
    const float s = sigmoidf_dev(p.logits[row * p.experts + e]);
    const float v = p.bias ? s + p.bias[e] : s;
    score[e] = s;
    key[e] = isnan(v) ? -INFINITY : v;
    if (isnan(v)) score[e] = __int_as_float(0x7fc00000);  // marks "never choose"
  }
  __syncthreads();
  for (int r = 0; r < p.top_k; ++r) {
    float bk = -INFINITY;
    int bi = -1;
    for (int e = threadIdx.x; e < p.experts; e += blockDim.x) {
      if (isnan(score[e])) continue;
      if (bi < 0 || better(key[e], e, bk, bi)) bk = key[e], bi = e;
    }
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) {
      const float ok = __shfl_xor_sync(0xffffffffu, bk, m);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, m);
      if (oi >= 0 && (bi < 0 || better(ok, oi, bk, bi))) bk = ok, bi = oi;
    }
    if (lane == 0) red_key[warp] = bk, red_idx[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
      bk = red_key[0], bi = red_idx[0];
      for (int w = 1; w < kThreads / 32; ++w)
        if (red_idx[w] >= 0 && (bi < 0 || better(red_key[w], red_idx[w], bk, bi)))
          bk = red_key[w], bi = red_idx[w];
      chosen[r] = bi;
      if (bi >= 0) score[bi] = __int_as_float(0x7fc00000);  // taken: out of later rounds
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float s_chosen[kRouterMaxTopK];
    float sum = 0.0f;
    for (int r = 0; r < p.top_k; ++r) {
      const int e = chosen[r];
      s_chosen[r] = e >= 0 ? sigmoidf_dev(p.logits[row * p.experts + e]) : 0.0f;
      if (e >= 0) sum += s_chosen[r];
    }
    for (int r = 0; r < p.top_k; ++r) {
      const int e = chosen[r];
      float w = 0.0f;
      if (e >= 0)
        w = p.norm ? (sum > 0.0f ? s_chosen[r] / sum * p.scale : 0.0f) : s_chosen[r] * p.scale;
      p.experts_out[row * p.top_k + r] = e;
      p.weights_out[row * p.top_k + r] = w;
    }
  }
}

}  // namespace

void route_experts(const float* logits, const float* bias, int64_t rows, int experts, int top_k,
                   bool norm_topk_prob, float routed_scaling_factor, int32_t* experts_out,
                   float* weights_out, cudaStream_t stream) {
  SPARKGLM_ASSERT(experts > 0 && experts <= kRouterMaxExperts && top_k > 0 &&
                      top_k <= kRouterMaxTopK && top_k <= experts,
                  "route_experts: expert count or top_k out of range");
  if (rows <= 0) return;
  router_kernel<<<unsigned(rows), kThreads, 0, stream>>>(
      RouterParams{logits, bias, experts_out, weights_out, experts, top_k, norm_topk_prob,
                   routed_scaling_factor});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
