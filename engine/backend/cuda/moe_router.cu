#include "engine/backend/cuda/moe_router.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kRowsPerBlock = 4;
constexpr int kThreads = 32 * kRowsPerBlock;

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

// One warp a row, kRowsPerBlock rows a block, no block-wide barrier: the row's keys live in the
// warp's slice of shared memory, and each round takes the best remaining expert by a lane scan
// and a warp (key, index) reduction. The tie rule is a total order, so the choice does not
// depend on how the reduction is split (the 2026-12-02 kernel, one block a row and a block-wide
// reduction a round, chose the same experts in 12 us a decode row on the H200).
__global__ void __launch_bounds__(kThreads)
    router_kernel(const __grid_constant__ RouterParams p, int64_t rows) {
  __shared__ float key[kRowsPerBlock][kRouterMaxExperts];
  __shared__ bool open[kRowsPerBlock][kRouterMaxExperts];  // not NaN and not yet taken
  pdl_wait();                                              // the router's logits
  pdl_trigger();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + warp;
  if (row >= rows) return;  // uniform across the warp; no block barrier follows
  float* k = key[warp];
  bool* o = open[warp];
  for (int e = lane; e < p.experts; e += 32) {
    const float sg = sigmoidf_dev(p.logits[row * p.experts + e]);
    const float v = p.bias ? sg + p.bias[e] : sg;
    k[e] = isnan(v) ? -INFINITY : v;
    o[e] = !isnan(v);
  }
  __syncwarp();
  int chosen[kRouterMaxTopK];
  for (int r = 0; r < p.top_k; ++r) {
    float bk = -INFINITY;
    int bi = -1;
    for (int e = lane; e < p.experts; e += 32)
      if (o[e] && (bi < 0 || better(k[e], e, bk, bi))) bk = k[e], bi = e;
#pragma unroll
    for (int m = 16; m > 0; m >>= 1) {
      const float ok = __shfl_xor_sync(0xffffffffu, bk, m);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, m);
      if (oi >= 0 && (bi < 0 || better(ok, oi, bk, bi))) bk = ok, bi = oi;
    }
    chosen[r] = bi;                                   // the same in every lane
    if (bi >= 0 && lane == (bi & 31)) o[bi] = false;  // taken: out of later rounds
    __syncwarp();
  }
  if (lane != 0) return;
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

}  // namespace

void route_experts(const float* logits, const float* bias, int64_t rows, int experts, int top_k,
                   bool norm_topk_prob, float routed_scaling_factor, int32_t* experts_out,
                   float* weights_out, cudaStream_t stream) {
  SPARKGLM_ASSERT(experts > 0 && experts <= kRouterMaxExperts && top_k > 0 &&
                      top_k <= kRouterMaxTopK && top_k <= experts,
                  "route_experts: expert count or top_k out of range");
  if (rows <= 0) return;
  launch_dependent(router_kernel, unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0,
                   stream,
                   RouterParams{logits, bias, experts_out, weights_out, experts, top_k,
                                norm_topk_prob, routed_scaling_factor},
                   rows);
}

}  // namespace sparkglm::cuda
