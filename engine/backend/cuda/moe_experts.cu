#include "engine/backend/cuda/moe_experts.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/moe_decode_device.cuh"
#include "engine/backend/cuda/moe_router.h"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

using namespace moe_decode;

constexpr int kStages = 4;  // 32-k blocks of W loaded ahead per warp
constexpr int64_t kKMultiple = 32 * kSplitK * kStages;
constexpr int64_t kNarrowKMultiple = 32;  // kRows (16) divides it too
constexpr int kRouterMaxExpertsForGroups = 1024;
constexpr int kGroupThreads = 256;
constexpr int kExpertsPerThread = kRouterMaxExpertsForGroups / kGroupThreads;

// One block. groups[0] = number of groups; group i at groups + 1 + i * kGroupInts: its expert,
// then up to 8 of its pairs in pair order (-1 fills a group's unused columns). Experts in
// increasing order; a pair whose slot is empty (expert < 0 or >= E) joins no group.
__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const __grid_constant__ MoeExpertArgs a, int n_experts) {
  __shared__ int count[kRouterMaxExpertsForGroups];
  __shared__ int first_group[kRouterMaxExpertsForGroups];
  __shared__ int total;
  __shared__ int warp_total[kGroupThreads / 32];
  pdl_wait();  // the router's experts
  pdl_trigger();
  const int pairs = int(a.tokens * a.top_k);
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int e = a.experts[p];
    if (e >= 0 && e < n_experts) atomicAdd(&count[e], 1);
  }
  __syncthreads();
  // first_group = the exclusive prefix sum of the experts' group counts: thread i scans experts
  // 4i .. 4i + 3, then the 256 thread sums are scanned by warp shuffles (integers: exact).
  int own[kExpertsPerThread], sum = 0;
#pragma unroll
  for (int j = 0; j < kExpertsPerThread; ++j) {
    const int e = int(threadIdx.x) * kExpertsPerThread + j;
    own[j] = e < n_experts ? (count[e] + kGroup - 1) / kGroup : 0;
    sum += own[j];
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int incl = sum;  // inclusive scan within the warp
#pragma unroll
  for (int m = 1; m < 32; m <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, m);
    if (lane >= m) incl += v;
  }
  if (lane == 31) warp_total[warp] = incl;
  __syncthreads();
  if (threadIdx.x == 0) {
    int g = 0;
    for (int w = 0; w < kGroupThreads / 32; ++w) {
      const int n = warp_total[w];
      warp_total[w] = g;
      g += n;
    }
    total = g;
    a.groups[0] = g;
  }
  __syncthreads();
  int g = warp_total[warp] + incl - sum;
#pragma unroll
  for (int j = 0; j < kExpertsPerThread; ++j) {
    const int e = int(threadIdx.x) * kExpertsPerThread + j;
    if (e < n_experts) first_group[e] = g;
    g += own[j];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < total * kGroupInts; i += blockDim.x) a.groups[1 + i] = -1;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int e = a.experts[p];
    if (e < 0 || e >= n_experts) continue;
    int rank = 0;  // earlier pairs of the same expert
    for (int q = 0; q < p; ++q) rank += a.experts[q] == e;
    int32_t* grp = a.groups + 1 + (first_group[e] + rank / kGroup) * kGroupInts;
    grp[0] = e;
    grp[1 + rank % kGroup] = p;
  }
}

// acc (one MMA C fragment) += rows [row0, row0 + 16) of w ([*, k]) times the 8 columns x, over
// this warp's quarter of k: column c is x_col (this lane's column, c = lane / 4), null for an
// unused column (zeros). Rows past `rows` repeat the last one (their sums are not stored).
// kNarrow (tinyglm-micro: k = 64 or 256, too short for quarters of 512): warp w takes the 32-wide
// k blocks w, w + 4, ... one at a time instead, so any k that is a multiple of 32 works; the
// warps' sums are still added in warp order, so a row's bits do not depend on the batch.
template <bool kNarrow>
__device__ __forceinline__ void rows_times_x(const uint16_t* w, int64_t k, int64_t row0,
                                             int64_t rows, const uint16_t* x_col, float* acc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const uint16_t* w0 = w + min(row0 + g, rows - 1) * k + t * 8;
  const uint16_t* w1 = w + min(row0 + g + 8, rows - 1) * k + t * 8;
  if constexpr (kNarrow) {
    for (int64_t kb0 = 32 * warp; kb0 < k; kb0 += 32 * kSplitK) {
      const uint4 wa = load_stream(w0 + kb0), wb = load_stream(w1 + kb0);
      uint4 xv = make_uint4(0, 0, 0, 0);
      if (x_col) xv = __ldcg(reinterpret_cast<const uint4*>(x_col + kb0 + t * 8));
      mma_bf16(acc, wa.x, wb.x, wa.y, wb.y, xv.x, xv.y);
      mma_bf16(acc, wa.z, wb.z, wa.w, wb.w, xv.z, xv.w);
    }
    return;
  }
  const int64_t per = k / kSplitK, k0 = warp * per;
  for (int64_t kb0 = k0; kb0 < k0 + per; kb0 += 32 * kStages) {
    uint4 wa[kStages], wb[kStages];
#pragma unroll
    for (int u = 0; u < kStages; ++u) {
      wa[u] = load_stream(w0 + kb0 + 32 * u);
      wb[u] = load_stream(w1 + kb0 + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < kStages; ++u) {
      uint4 xv = make_uint4(0, 0, 0, 0);
      if (x_col) xv = __ldcg(reinterpret_cast<const uint4*>(x_col + kb0 + 32 * u + t * 8));
      mma_bf16(acc, wa[u].x, wb[u].x, wa[u].y, wb[u].y, xv.x, xv.y);
      mma_bf16(acc, wa[u].z, wb[u].z, wa[u].w, wb[u].w, xv.z, xv.w);
    }
  }
}

// Grid: (W / 16, max groups). h[pair][n] = SiLU(min(g_n, L)) * clamp(u_n, -L, L), 16 rows n, for
// the group's pairs.
template <bool kNarrow>
__global__ void __launch_bounds__(kSplitK * 32)
    gate_up_kernel(const __grid_constant__ MoeExpertArgs a) {
  __shared__ float partial_g[kSplitK - 1][32][4], partial_u[kSplitK - 1][32][4];
  pdl_wait();
  pdl_trigger();
  int pair = -1;
  const int32_t* grp = block_group(a, &pair);
  if (!grp) return;
  const int64_t n0 = int64_t(blockIdx.x) * kRows;
  const uint16_t* gu = a.gate_up[grp[0]];
  const uint16_t* x = pair >= 0 ? a.x + (pair / a.top_k) * a.hidden : nullptr;
  float g[4] = {0, 0, 0, 0}, u[4] = {0, 0, 0, 0};
  rows_times_x<kNarrow>(gu, a.hidden, n0, a.width, x, g);
  rows_times_x<kNarrow>(gu + a.width * a.hidden, a.hidden, n0, a.width, x, u);
  reduce_warps(partial_g, g);
  if (!reduce_warps(partial_u, u)) return;
  // This lane holds columns 2t, 2t + 1: their pairs are those of lanes 8t and 8t + 4.
  const int lane = threadIdx.x & 31, row = lane >> 2, t = lane & 3;
  for (int c = 0; c < 2; ++c) {
    const int p = grp[1 + 2 * t + c];
    if (p < 0) continue;
    uint16_t* h = a.h + int64_t(p) * a.width;
    h[n0 + row] = f32_to_bf16_bits(swiglu(g[c], u[c], a.clamp_limit));
    h[n0 + row + 8] = f32_to_bf16_bits(swiglu(g[2 + c], u[2 + c], a.clamp_limit));
  }
}

// Grid: (D / 16, max groups). y[pair][n] = (W_down h[pair])[n] for the group's pairs.
template <bool kNarrow>
__global__ void __launch_bounds__(kSplitK * 32)
    down_kernel(const __grid_constant__ MoeExpertArgs a) {
  __shared__ float partial[kSplitK - 1][32][4];
  pdl_wait();
  pdl_trigger();
  int pair = -1;
  const int32_t* grp = block_group(a, &pair);
  if (!grp) return;
  const int64_t n0 = int64_t(blockIdx.x) * kRows;
  float acc[4] = {0, 0, 0, 0};
  rows_times_x<kNarrow>(a.down[grp[0]], a.width, n0, a.hidden,
                        pair >= 0 ? a.h + int64_t(pair) * a.width : nullptr, acc);
  if (!reduce_warps(partial, acc)) return;
  const int lane = threadIdx.x & 31, row = lane >> 2, t = lane & 3;
  for (int c = 0; c < 2; ++c) {
    const int p = grp[1 + 2 * t + c];
    if (p < 0) continue;
    float* y = a.y + int64_t(p) * a.hidden;
    y[n0 + row] = acc[c];
    y[n0 + row + 8] = acc[2 + c];
  }
}

// Grid: (T, ceil(W / 256)), one h element a thread (a decode step's few rows still spread over
// many blocks): the shared expert's h = SwiGLU(g, u) from its [T, 2W] projection.
__global__ void __launch_bounds__(256)
    shared_swiglu_kernel(const __grid_constant__ MoeExpertArgs a) {
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x, n = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (n >= a.width) return;
  a.shared_h[t * a.width + n] = f32_to_bf16_bits(swiglu(
      a.shared_gu[t * 2 * a.width + n], a.shared_gu[t * 2 * a.width + a.width + n], a.clamp_limit));
}

// Grid: (T, ceil(D / 256)), one output element a thread; out[t] = sum over ranks (increasing,
// empty slots skipped) of w * y, then + shared. Every rank's y is loaded before the first add
// (independent loads in flight together, where a loop of conditional loads waited for each in
// turn: 36 us for one token at D = 4096 on the H200); the adds are the same, in the same order.
__global__ void __launch_bounds__(256) combine_kernel(const __grid_constant__ MoeExpertArgs a) {
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x, d = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (d >= a.hidden) return;
  bool take[kRouterMaxTopK];
  float w[kRouterMaxTopK], y[kRouterMaxTopK];
#pragma unroll
  for (int r = 0; r < kRouterMaxTopK; ++r) {
    const int64_t slot = t * a.top_k + r;
    const int e = r < a.top_k ? a.experts[slot] : -1;
    take[r] = e >= 0 && e < a.n_experts;
    w[r] = take[r] ? a.weights[slot] : 0.0f;
    y[r] = take[r] ? a.y[slot * a.hidden + d] : 0.0f;
  }
  float o = 0.0f;
#pragma unroll
  for (int r = 0; r < kRouterMaxTopK; ++r)
    if (take[r]) o += w[r] * y[r];
  if (a.shared_gate_up) o += a.shared_y[t * a.hidden + d];
  a.out[t * a.hidden + d] = o;
}

// The shared expert: h = SwiGLU of its [T, 2W] gate/up product, then its down product.
void launch_shared(const MoeExpertArgs& a, cudaStream_t stream) {
  gemv_bf16(a.x, a.tokens, a.shared_gate_up, 2 * a.width, a.hidden, a.shared_gu, stream);
  launch_dependent(shared_swiglu_kernel, dim3(unsigned(a.tokens), unsigned((a.width + 255) / 256)),
                   256, 0, stream, a);
  gemv_bf16(a.shared_h, a.tokens, a.shared_down, a.hidden, a.width, a.shared_y, stream);
}

void launch_combine(const MoeExpertArgs& a, cudaStream_t stream) {
  SPARKGLM_ASSERT(a.top_k > 0 && a.top_k <= kRouterMaxTopK,
                  "moe decode combine: top_k out of range");
  launch_dependent(combine_kernel, dim3(unsigned(a.tokens), unsigned((a.hidden + 255) / 256)), 256,
                   0, stream, a);
}

}  // namespace

int64_t moe_decode_group_ints(int64_t tokens, int top_k) {
  return 1 + tokens * top_k * kGroupInts;
}

void moe_experts_decode(const MoeExpertArgs& a, cudaStream_t stream) {
  // Multiples of 512: the production kernels. Otherwise (tinyglm-micro) the narrow ones, which
  // need multiples of 32 (k blocks) and the MMA's 16 rows.
  const bool wide = a.hidden % kKMultiple == 0 && a.width % kKMultiple == 0;
  SPARKGLM_ASSERT(
      a.hidden % kNarrowKMultiple == 0 && a.width % kNarrowKMultiple == 0 && a.top_k > 0,
      "moe_experts_decode: hidden and expert width must be multiples of 32");
  SPARKGLM_ASSERT(
      a.groups != nullptr && a.n_experts > 0 && a.n_experts <= kRouterMaxExpertsForGroups,
      "moe_experts_decode: needs the groups workspace and 1..1024 experts");
  if (a.tokens <= 0) return;
  const unsigned pairs = unsigned(a.tokens * a.top_k);  // the most groups there can be
  launch_dependent(group_kernel, 1, kGroupThreads, 0, stream, a, a.n_experts);
  const dim3 gate_up_grid(unsigned(a.width / kRows), pairs),
      down_grid(unsigned(a.hidden / kRows), pairs);
  if (wide) {
    launch_dependent(gate_up_kernel<false>, gate_up_grid, kSplitK * 32, 0, stream, a);
    launch_dependent(down_kernel<false>, down_grid, kSplitK * 32, 0, stream, a);
  } else {
    launch_dependent(gate_up_kernel<true>, gate_up_grid, kSplitK * 32, 0, stream, a);
    launch_dependent(down_kernel<true>, down_grid, kSplitK * 32, 0, stream, a);
  }
  if (a.shared_gate_up && a.shared_done) {
    SPARKGLM_CUDA_CHECK(cudaStreamWaitEvent(stream, a.shared_done, 0));
  } else if (a.shared_gate_up) {
    launch_shared(a, stream);
  }
  launch_combine(a, stream);
}

void moe_shared_expert_beside(const MoeExpertArgs& a, cudaStream_t stream,
                              const StreamBranch& side) {
  SPARKGLM_ASSERT(a.shared_gate_up && a.shared_down && a.tokens > 0,
                  "moe_shared_expert_beside: a shared expert and tokens");
  launch_shared(a, side.fork(stream));
  side.close();
}

void moe_decode_group(const MoeExpertArgs& a, cudaStream_t stream) {
  SPARKGLM_ASSERT(
      a.groups != nullptr && a.n_experts > 0 && a.n_experts <= kRouterMaxExpertsForGroups,
      "moe_decode_group: needs the groups workspace and 1..1024 experts");
  launch_dependent(group_kernel, 1, kGroupThreads, 0, stream, a, a.n_experts);
}

void moe_decode_down(const MoeExpertArgs& a, cudaStream_t stream) {
  SPARKGLM_ASSERT(a.width % kNarrowKMultiple == 0 && a.hidden % kRows == 0 && a.groups && a.down,
                  "moe_decode_down: width a multiple of 32, hidden of 16, groups and weights");
  if (a.tokens <= 0) return;
  // The production kernel where k (width) is a multiple of 512, the narrow one otherwise.
  const dim3 grid(unsigned(a.hidden / kRows), unsigned(a.tokens * a.top_k));
  if (a.width % kKMultiple == 0)
    launch_dependent(down_kernel<false>, grid, kSplitK * 32, 0, stream, a);
  else
    launch_dependent(down_kernel<true>, grid, kSplitK * 32, 0, stream, a);
}

void moe_decode_combine(const MoeExpertArgs& a, cudaStream_t stream) {
  launch_combine(a, stream);
}

}  // namespace sparkglm::cuda
