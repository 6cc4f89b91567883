#include "engine/backend/cuda/moe_experts.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/gemm.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kSplitK = 4;  // warps per block, each a contiguous quarter of k
constexpr int kStages = 4;  // 32-k blocks of W loaded ahead per warp
constexpr int kRows = 16;   // W rows per block (the MMA's 16 rows)
constexpr int64_t kKMultiple = 32 * kSplitK * kStages;

// The pair's routed expert weights; false for an empty slot (no usable expert).
__device__ __forceinline__ bool pair_weights(const MoeExpertArgs& a, int64_t pair,
                                             const uint16_t** gu, const uint16_t** dn) {
  const int32_t e = a.experts[pair];  // pairs are [T, k] in the router's layout
  if (e < 0) return false;
  *gu = a.gate_up[e], *dn = a.down[e];
  return true;
}

__device__ __forceinline__ float swiglu(float gv, float uv, float limit) {
  if (limit > 0.0f) {  // std::min / std::clamp's comparisons: a NaN passes through
    gv = limit < gv ? limit : gv;
    uv = uv < -limit ? -limit : (limit < uv ? limit : uv);
  }
  return gv / (1.0f + expf(-gv)) * uv;
}

// acc (one MMA C fragment, column 0 = x) += rows [row0, row0 + 16) of w ([*, k]) times x ([k]),
// over this warp's quarter of k. Rows past `rows` repeat the last one (their sums are not stored).
__device__ __forceinline__ void rows_times_x(const uint16_t* w, int64_t k, int64_t row0,
                                             int64_t rows, const uint16_t* x, float* acc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const uint16_t* w0 = w + min(row0 + g, rows - 1) * k + t * 8;
  const uint16_t* w1 = w + min(row0 + g + 8, rows - 1) * k + t * 8;
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
      // Only B column 0 (lanes with g == 0) carries x; the other columns are zero.
      uint4 xv = make_uint4(0, 0, 0, 0);
      if (g == 0) xv = __ldg(reinterpret_cast<const uint4*>(x + kb0 + 32 * u + t * 8));
      mma_bf16(acc, wa[u].x, wb[u].x, wa[u].y, wb[u].y, xv.x, xv.y);
      mma_bf16(acc, wa[u].z, wb[u].z, wa[u].w, wb[u].w, xv.z, xv.w);
    }
  }
}

// Sums the kSplitK warps' fragments in warp order; returns true in the lanes holding rows
// g (value *lo) and g + 8 (value *hi) of column 0, i.e. lanes with t == 0 of warp 0.
__device__ __forceinline__ bool reduce_warps(float (*partial)[32][2], const float* acc, float* lo,
                                             float* hi) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (warp > 0) partial[warp - 1][lane][0] = acc[0], partial[warp - 1][lane][1] = acc[2];
  __syncthreads();
  if (warp != 0 || (lane & 3) != 0) return false;
  float a = acc[0], b = acc[2];
#pragma unroll
  for (int w = 0; w < kSplitK - 1; ++w) a = a + partial[w][lane][0], b = b + partial[w][lane][1];
  *lo = a, *hi = b;
  return true;
}

// Grid: (W / 16, pairs). h[pair][n] = SiLU(min(g_n, L)) * clamp(u_n, -L, L) for 16 rows n.
__global__ void __launch_bounds__(kSplitK * 32)
    gate_up_kernel(const __grid_constant__ MoeExpertArgs a) {
  __shared__ float partial_g[kSplitK - 1][32][2], partial_u[kSplitK - 1][32][2];
  const int64_t pair = blockIdx.y, n0 = int64_t(blockIdx.x) * kRows;
  const int lane = threadIdx.x & 31;
  uint16_t* h = a.h + pair * a.width;
  const uint16_t *gu = nullptr, *dn = nullptr;
  if (!pair_weights(a, pair, &gu, &dn)) {  // an empty slot contributes nothing: h = 0
    if (threadIdx.x < kRows) h[n0 + threadIdx.x] = 0;
    return;
  }
  const uint16_t* x = a.x + (pair / a.top_k) * a.hidden;
  float g[4] = {0, 0, 0, 0}, u[4] = {0, 0, 0, 0};
  rows_times_x(gu, a.hidden, n0, a.width, x, g);
  rows_times_x(gu + a.width * a.hidden, a.hidden, n0, a.width, x, u);
  float g_lo, g_hi, u_lo, u_hi;
  const bool mine = reduce_warps(partial_g, g, &g_lo, &g_hi);
  reduce_warps(partial_u, u, &u_lo, &u_hi);
  if (!mine) return;
  const int row = lane >> 2;
  h[n0 + row] = f32_to_bf16_bits(swiglu(g_lo, u_lo, a.clamp_limit));
  h[n0 + row + 8] = f32_to_bf16_bits(swiglu(g_hi, u_hi, a.clamp_limit));
}

// Grid: (D / 16, pairs). y[pair][n] = (W_down h)[n].
__global__ void __launch_bounds__(kSplitK * 32)
    down_kernel(const __grid_constant__ MoeExpertArgs a) {
  __shared__ float partial[kSplitK - 1][32][2];
  const int64_t pair = blockIdx.y, n0 = int64_t(blockIdx.x) * kRows;
  const int lane = threadIdx.x & 31;
  float* y = a.y + pair * a.hidden;
  const uint16_t *gu = nullptr, *dn = nullptr;
  if (!pair_weights(a, pair, &gu, &dn)) {
    if (threadIdx.x < kRows) y[n0 + threadIdx.x] = 0.0f;
    return;
  }
  float acc[4] = {0, 0, 0, 0};
  rows_times_x(dn, a.width, n0, a.hidden, a.h + pair * a.width, acc);
  float lo, hi;
  if (!reduce_warps(partial, acc, &lo, &hi)) return;
  y[n0 + (lane >> 2)] = lo;
  y[n0 + (lane >> 2) + 8] = hi;
}

// Grid: T; the shared expert's h = SwiGLU(g, u) from its [T, 2W] projection.
__global__ void __launch_bounds__(256)
    shared_swiglu_kernel(const __grid_constant__ MoeExpertArgs a) {
  const int64_t t = blockIdx.x;
  for (int64_t n = threadIdx.x; n < a.width; n += blockDim.x)
    a.shared_h[t * a.width + n] =
        f32_to_bf16_bits(swiglu(a.shared_gu[t * 2 * a.width + n],
                                a.shared_gu[t * 2 * a.width + a.width + n], a.clamp_limit));
}

// Grid: T; out[t] = sum over ranks (increasing, empty slots skipped) of w * y, then + shared.
__global__ void __launch_bounds__(256) combine_kernel(const __grid_constant__ MoeExpertArgs a) {
  const int64_t t = blockIdx.x;
  for (int64_t d = threadIdx.x; d < a.hidden; d += blockDim.x) {
    float o = 0.0f;
    for (int r = 0; r < a.top_k; ++r)
      if (a.experts[t * a.top_k + r] >= 0)
        o += a.weights[t * a.top_k + r] * a.y[(t * a.top_k + r) * a.hidden + d];
    if (a.shared_gate_up) o += a.shared_y[t * a.hidden + d];
    a.out[t * a.hidden + d] = o;
  }
}

}  // namespace

void moe_experts_decode(const MoeExpertArgs& a, cudaStream_t stream) {
  SPARKGLM_ASSERT(a.hidden % kKMultiple == 0 && a.width % kKMultiple == 0 && a.top_k > 0,
                  "moe_experts_decode: hidden and expert width must be multiples of 512");
  if (a.tokens <= 0) return;
  const unsigned pairs = unsigned(a.tokens * a.top_k);
  gate_up_kernel<<<dim3(unsigned(a.width / kRows), pairs), kSplitK * 32, 0, stream>>>(a);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  down_kernel<<<dim3(unsigned(a.hidden / kRows), pairs), kSplitK * 32, 0, stream>>>(a);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  if (a.shared_gate_up) {
    gemv_bf16(a.x, a.tokens, a.shared_gate_up, 2 * a.width, a.hidden, a.shared_gu, stream);
    shared_swiglu_kernel<<<unsigned(a.tokens), 256, 0, stream>>>(a);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
    gemv_bf16(a.shared_h, a.tokens, a.shared_down, a.hidden, a.width, a.shared_y, stream);
  }
  combine_kernel<<<unsigned(a.tokens), 256, 0, stream>>>(a);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
