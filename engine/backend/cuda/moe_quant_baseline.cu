// The quantized MoE decode kernels of 2026-12-02, unchanged: each weight decoded to FP32 and packed
// to BF16 (about ten instructions a weight), gate then up one after the other, one step of
// prefetch. Kept for one release as the G1 baseline (moe_quant_baseline.h).
#include "engine/backend/cuda/moe_quant_baseline.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/moe_decode_device.cuh"
#include "engine/backend/cuda/moe_quant_device.cuh"
#include "engine/backend/cuda/scale_codes.cuh"

namespace sparkglm::cuda::moe_quant {

namespace {

using moe_decode::kRows;
using moe_decode::kSplitK;

constexpr int kStep = 128;  // k per step of a warp; lane t: 32 of them

// One step's raw weights of this lane's two W rows (g and g + 8), 32 consecutive k each.
struct Raw {
  uint4 v[2][2];  // [row][half]: 32 E4M3 bytes; NVFP4 uses [row][0] only (32 E2M1 nibbles)
  uint32_t s[2];  // [row]: NVFP4 two E4M3 block-scale codes (low byte first); MXFP8 one E8M0 code
};

// kc: this lane's first k of the step (a multiple of 32).
template <QuantFormat F>
__device__ __forceinline__ Raw load_raw(const ExpertView& w, int64_t k, int64_t r0, int64_t r1,
                                        int64_t kc) {
  Raw r;
  const int64_t row[2] = {r0, r1};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if constexpr (F == QuantFormat::kNvfp4) {
      r.v[i][0] = load_stream(w.data + row[i] * (k / 2) + kc / 2);
      r.v[i][1] = make_uint4(0, 0, 0, 0);
      r.s[i] =
          __ldg(reinterpret_cast<const unsigned short*>(w.scale + row[i] * (k / 16) + kc / 16));
    } else {
      const uint8_t* p = w.data + row[i] * k + kc;
      r.v[i][0] = load_stream(p);
      r.v[i][1] = load_stream(p + 16);
      r.s[i] =
          F == QuantFormat::kMxfp8 ? uint32_t(__ldg(w.scale + row[i] * (k / 32) + kc / 32)) : 0u;
    }
  }
  return r;
}

// Two values as one BF16 pair (low half the even k). The values are exact in BF16 (see the
// header), so the high halves of their FP32 bits are their BF16 bits.
__device__ __forceinline__ uint32_t pack_exact(float lo, float hi) {
  return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
}

// Row i of `r` as 16 BF16 pairs: p[j] holds k kc + 2j, kc + 2j + 1.
template <QuantFormat F>
__device__ __forceinline__ void to_bf16_pairs(const Raw& r, int i, uint32_t* p) {
  if constexpr (F == QuantFormat::kNvfp4) {
    const float s0 = e4m3_to_f32(uint8_t(r.s[i] & 0xffu));  // k kc .. kc + 15
    const float s1 = e4m3_to_f32(uint8_t(r.s[i] >> 8));     // k kc + 16 .. kc + 31
    const uint32_t u[4] = {r.v[i][0].x, r.v[i][0].y, r.v[i][0].z, r.v[i][0].w};
#pragma unroll
    for (int j = 0; j < 16; ++j) {  // byte j: k 2j (low nibble), 2j + 1 (high nibble)
      const uint32_t b = (u[j / 4] >> (8 * (j % 4))) & 0xffu;
      const float s = j < 8 ? s0 : s1;
      p[j] = pack_exact(e2m1_to_f32_dev(b & 0xfu) * s, e2m1_to_f32_dev(b >> 4) * s);
    }
  } else {
    const uint32_t u[8] = {r.v[i][0].x, r.v[i][0].y, r.v[i][0].z, r.v[i][0].w,
                           r.v[i][1].x, r.v[i][1].y, r.v[i][1].z, r.v[i][1].w};
#pragma unroll
    for (int j = 0; j < 16; ++j) {  // bytes 2j, 2j + 1
      const uint32_t h = u[j / 2] >> (16 * (j % 2));
      float lo = e4m3_to_f32(uint8_t(h & 0xffu)), hi = e4m3_to_f32(uint8_t((h >> 8) & 0xffu));
      if constexpr (F == QuantFormat::kMxfp8) {
        const float s = e8m0_to_f32_dev(r.s[i]);
        lo = lo * s;
        hi = hi * s;
      }
      p[j] = pack_exact(lo, hi);
    }
  }
}

// acc += the step's 16 x 128 block of W (rows g, g + 8 from this lane) times the 8 columns x (this
// lane's column x_col, null: zeros), 8 MMAs in k order. MMA j takes k kc + 4j .. kc + 4j + 3 of
// each lane, for A and B alike, so the products pair the same k.
template <QuantFormat F>
__device__ __forceinline__ void step_mma(const Raw& r, const uint16_t* x_col, int64_t kc,
                                         float* acc) {
  uint32_t a0[16], a1[16], xb[16];
  to_bf16_pairs<F>(r, 0, a0);
  to_bf16_pairs<F>(r, 1, a1);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (x_col) v = __ldg(reinterpret_cast<const uint4*>(x_col + kc) + q);
    xb[4 * q] = v.x;
    xb[4 * q + 1] = v.y;
    xb[4 * q + 2] = v.z;
    xb[4 * q + 3] = v.w;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j)
    mma_bf16(acc, a0[2 * j], a1[2 * j], a0[2 * j + 1], a1[2 * j + 1], xb[2 * j], xb[2 * j + 1]);
}

// acc (one MMA C fragment) += rows [row0, row0 + 16) of w ([rows, k]) times the 8 columns, over
// this warp's quarter of k, 128 k per step, the next step's weights loaded before this one's MMAs.
// FP8 block: each step's partial is scaled by its scale_inv (the 16 rows share a 128-row block).
template <QuantFormat F>
__device__ __forceinline__ void rows_times_x(const ExpertView& w, int64_t k, int64_t row0,
                                             int64_t rows, const uint16_t* x_col, float* acc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t r0 = min(row0 + g, rows - 1), r1 = min(row0 + g + 8, rows - 1);
  const int64_t per = k / kSplitK, k0 = warp * per, k1 = k0 + per;
  Raw cur = load_raw<F>(w, k, r0, r1, k0 + 32 * t);
  for (int64_t kb = k0; kb < k1; kb += kStep) {
    Raw next = cur;
    if (kb + kStep < k1) next = load_raw<F>(w, k, r0, r1, kb + kStep + 32 * t);
    if constexpr (F == QuantFormat::kFp8Block) {
      float part[4] = {0, 0, 0, 0};
      step_mma<F>(cur, x_col, kb + 32 * t, part);
      const float s = __ldg(w.scale_inv + (row0 / 128) * (k / 128) + kb / 128);
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] = fmaf(part[i], s, acc[i]);
    } else {
      step_mma<F>(cur, x_col, kb + 32 * t, acc);
    }
    cur = next;
  }
}

// Grid: (W / 16, max groups). h[pair][n] = SwiGLU(gs_gate * g_n, gs_up * u_n), 16 rows n, for the
// group's pairs.
template <QuantFormat F>
__global__ void __launch_bounds__(kSplitK * 32)
    gate_up_kernel(const __grid_constant__ QuantDecodeArgs q) {
  __shared__ float partial_g[kSplitK - 1][32][4], partial_u[kSplitK - 1][32][4];
  const MoeExpertArgs& a = q.a;
  int pair = -1;
  const int32_t* grp = moe_decode::block_group(a, &pair);
  if (!grp) return;
  const int e = grp[0];
  const ExpertView gate = moe_quant::view_of(q.gate, e), up = moe_quant::view_of(q.up, e);
  const int64_t n0 = int64_t(blockIdx.x) * kRows;
  const uint16_t* x = pair >= 0 ? a.x + (pair / a.top_k) * a.hidden : nullptr;
  float g[4] = {0, 0, 0, 0}, u[4] = {0, 0, 0, 0};
  rows_times_x<F>(gate, a.hidden, n0, a.width, x, g);
  rows_times_x<F>(up, a.hidden, n0, a.width, x, u);
  moe_decode::reduce_warps(partial_g, g);
  if (!moe_decode::reduce_warps(partial_u, u)) return;
  // This lane holds columns 2t, 2t + 1: their pairs are those of lanes 8t and 8t + 4.
  const int lane = threadIdx.x & 31, row = lane >> 2, t = lane & 3;
  for (int c = 0; c < 2; ++c) {
    const int p = grp[1 + 2 * t + c];
    if (p < 0) continue;
    uint16_t* h = a.h + int64_t(p) * a.width;
    h[n0 + row] = f32_to_bf16_bits(
        moe_decode::swiglu(g[c] * gate.global_scale, u[c] * up.global_scale, a.clamp_limit));
    h[n0 + row + 8] = f32_to_bf16_bits(moe_decode::swiglu(
        g[2 + c] * gate.global_scale, u[2 + c] * up.global_scale, a.clamp_limit));
  }
}

// Grid: (D / 16, max groups). y[pair][n] = gs_down * (W_down h[pair])[n] for the group's pairs.
template <QuantFormat F>
__global__ void __launch_bounds__(kSplitK * 32)
    down_kernel(const __grid_constant__ QuantDecodeArgs q) {
  __shared__ float partial[kSplitK - 1][32][4];
  const MoeExpertArgs& a = q.a;
  int pair = -1;
  const int32_t* grp = moe_decode::block_group(a, &pair);
  if (!grp) return;
  const ExpertView down = moe_quant::view_of(q.down, grp[0]);
  const int64_t n0 = int64_t(blockIdx.x) * kRows;
  float acc[4] = {0, 0, 0, 0};
  rows_times_x<F>(down, a.width, n0, a.hidden, pair >= 0 ? a.h + int64_t(pair) * a.width : nullptr,
                  acc);
  if (!moe_decode::reduce_warps(partial, acc)) return;
  const int lane = threadIdx.x & 31, row = lane >> 2, t = lane & 3;
  for (int c = 0; c < 2; ++c) {
    const int p = grp[1 + 2 * t + c];
    if (p < 0) continue;
    float* y = a.y + int64_t(p) * a.hidden;
    y[n0 + row] = acc[c] * down.global_scale;
    y[n0 + row + 8] = acc[2 + c] * down.global_scale;
  }
}

template <QuantFormat F>
void launch_experts(const QuantDecodeArgs& q, unsigned pairs, cudaStream_t stream) {
  gate_up_kernel<F><<<dim3(unsigned(q.a.width / kRows), pairs), kSplitK * 32, 0, stream>>>(q);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <QuantFormat F>
void launch_down(const QuantDecodeArgs& q, unsigned pairs, cudaStream_t stream) {
  down_kernel<F><<<dim3(unsigned(q.a.hidden / kRows), pairs), kSplitK * 32, 0, stream>>>(q);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launch_routed_baseline(const QuantDecodeArgs& q, unsigned pairs, cudaStream_t stream) {
  by_format(q.gate.format, [&](auto f) { launch_experts<decltype(f)::value>(q, pairs, stream); });
  by_format(q.down.format, [&](auto f) { launch_down<decltype(f)::value>(q, pairs, stream); });
}

}  // namespace sparkglm::cuda::moe_quant
