#include "engine/backend/cuda/mla_absorb.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/lane_linear.cuh"
#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kColsPerBlock = 64;  // e columns of q~ per block: 16 threads x 4

struct AbsorbParams {
  const float* q;        // [T, H*dn]
  const uint16_t* kv_b;  // [H*(dn+dv), R]
  float* q_tilde;        // [T, H, R]
  int64_t rows;          // T
  int heads, dn, dv, r;
};

// Shared memory of one block: W_kb,h[:, e0 .. e0+64) as BF16 [dn][64], then the block's query
// rows t0 .. t0+kRowsPerBlock transposed, FP32 [dn][kRowsPerBlock] (rows past T are zeros).
template <int kRowsPerBlock>
__device__ __forceinline__ void stage_tiles(const AbsorbParams& p, int h, int e0, int64_t t0,
                                            uint16_t* ws, float* qs) {
  // 8 vectors of 8 BF16 per W row; the queries go in transposed, 4 values per vector, with
  // adjacent threads on adjacent rows so that the transposed stores hit distinct banks.
  const uint16_t* w = p.kv_b + (int64_t(h) * (p.dn + p.dv)) * p.r + e0;
  lane_linear::stage_vectors<8>(reinterpret_cast<uint4*>(ws), int64_t(p.dn) * 8, [&](int64_t v) {
    return reinterpret_cast<const uint4*>(w + (v / 8) * p.r) + v % 8;
  });
  // W is the model's, staged before the wait; the queries are the kernel ahead's (a no-op where
  // the kernel was launched plainly: pdl.cuh).
  pdl_wait();
  pdl_trigger();
  const int quads = p.dn / 4;
  for (int base = threadIdx.x; base < kRowsPerBlock * quads; base += 4 * 256) {
    float4 x[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int v = base + 256 * u, t = v % kRowsPerBlock, d = (v / kRowsPerBlock) * 4;
      x[u] = make_float4(0, 0, 0, 0);
      if (v < kRowsPerBlock * quads && t0 + t < p.rows)
        x[u] = __ldcg(reinterpret_cast<const float4*>(p.q + (t0 + t) * p.heads * p.dn +
                                                      int64_t(h) * p.dn + d));
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int v = base + 256 * u, t = v % kRowsPerBlock, d = (v / kRowsPerBlock) * 4;
      if (v >= kRowsPerBlock * quads) continue;
      qs[(d + 0) * kRowsPerBlock + t] = x[u].x;
      qs[(d + 1) * kRowsPerBlock + t] = x[u].y;
      qs[(d + 2) * kRowsPerBlock + t] = x[u].z;
      qs[(d + 3) * kRowsPerBlock + t] = x[u].w;
    }
  }
  __syncthreads();
}

// Decode, T <= 4 (supports 16). Grid: (R / 64, H); block: 256 threads = 64 columns x 4 row
// groups, group g taking rows g, g+4, ... < T, so for one row only two warps compute (the others
// would only repeat the chain on padding). Each output is one FMA chain over d = 0, 1, ..., dn-1.
constexpr int kDecodeRows = 16;
__global__ void __launch_bounds__(256)
    absorb_decode_kernel(const __grid_constant__ AbsorbParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* ws = reinterpret_cast<uint16_t*>(smem);                       // [dn][64]
  float* qs = reinterpret_cast<float*>(smem + p.dn * kColsPerBlock * 2);  // [dn][16]
  const int e0 = blockIdx.x * kColsPerBlock, h = blockIdx.y;
  stage_tiles<kDecodeRows>(p, h, e0, 0, ws, qs);
  const int c = threadIdx.x % kColsPerBlock, g = threadIdx.x / kColsPerBlock;
  if (g >= p.rows) return;  // whole warps: a group is two warps
  float acc[kDecodeRows / 4];
#pragma unroll
  for (int u = 0; u < kDecodeRows / 4; ++u) acc[u] = 0.0f;
#pragma unroll 4
  for (int d = 0; d < p.dn; ++d) {
    const float wv = bf16_bits_to_f32(ws[d * kColsPerBlock + c]);
#pragma unroll
    for (int u = 0; u < kDecodeRows / 4; ++u)
      if (g + 4 * u < p.rows) acc[u] = fmaf(qs[d * kDecodeRows + g + 4 * u], wv, acc[u]);
  }
#pragma unroll
  for (int u = 0; u < kDecodeRows / 4; ++u) {
    const int64_t t = g + 4 * u;
    if (t < p.rows) p.q_tilde[(t * p.heads + h) * p.r + e0 + c] = acc[u];
  }
}

// T > 4. Grid: (R / 64, H, ceil(T / kRowsPerBlock)); block: 256 threads = 16 column quads x 16
// row groups of kRowsPerBlock / 16 rows, so a step over d reads 4 weights and the thread's rows
// as vectors. Each output is one FMA chain over d = 0, 1, ..., dn-1.
template <int kRowsPerBlock>
__global__ void __launch_bounds__(256) absorb_kernel(const __grid_constant__ AbsorbParams p) {
  constexpr int kRowsPerThread = kRowsPerBlock / 16;
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* ws = reinterpret_cast<uint16_t*>(smem);                       // [dn][64]
  float* qs = reinterpret_cast<float*>(smem + p.dn * kColsPerBlock * 2);  // [dn][kRowsPerBlock]
  const int e0 = blockIdx.x * kColsPerBlock, h = blockIdx.y;
  const int64_t t0 = int64_t(blockIdx.z) * kRowsPerBlock;
  stage_tiles<kRowsPerBlock>(p, h, e0, t0, ws, qs);

  const int tx = threadIdx.x % 16,
            ty = threadIdx.x / 16;  // columns 4tx.., rows ty*kRowsPerThread..
  float acc[kRowsPerThread][4];
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) acc[a][0] = acc[a][1] = acc[a][2] = acc[a][3] = 0.0f;
#pragma unroll 4
  for (int d = 0; d < p.dn; ++d) {
    const uint2 wv = *reinterpret_cast<const uint2*>(ws + d * kColsPerBlock + 4 * tx);
    const float wf[4] = {__uint_as_float(wv.x << 16), __uint_as_float(wv.x & 0xffff0000u),
                         __uint_as_float(wv.y << 16), __uint_as_float(wv.y & 0xffff0000u)};
    float qv[kRowsPerThread];
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a)
      qv[a] = qs[d * kRowsPerBlock + ty * kRowsPerThread + a];
#pragma unroll
    for (int a = 0; a < kRowsPerThread; ++a)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][c] = fmaf(qv[a], wf[c], acc[a][c]);
  }
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
    const int64_t t = t0 + ty * kRowsPerThread + a;
    if (t < p.rows)
      *reinterpret_cast<float4*>(p.q_tilde + (t * p.heads + h) * p.r + e0 + 4 * tx) =
          make_float4(acc[a][0], acc[a][1], acc[a][2], acc[a][3]);
  }
}

void launch_absorb_decode(const AbsorbParams& p, cudaStream_t stream) {
  const int smem = p.dn * kColsPerBlock * 2 + p.dn * kDecodeRows * 4;
  if (smem > 48 * 1024)
    SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(absorb_decode_kernel,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(unsigned(p.r / kColsPerBlock), unsigned(p.heads));
  launch_dependent(absorb_decode_kernel, grid, 256, size_t(smem), stream, p);
}

template <int kRowsPerBlock>
void launch_absorb(const AbsorbParams& p, cudaStream_t stream) {
  const int smem = p.dn * kColsPerBlock * 2 + p.dn * kRowsPerBlock * 4;
  if (smem > 48 * 1024)
    SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(absorb_kernel<kRowsPerBlock>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid(unsigned(p.r / kColsPerBlock), unsigned(p.heads),
                  unsigned((p.rows + kRowsPerBlock - 1) / kRowsPerBlock));
  absorb_kernel<kRowsPerBlock><<<grid, 256, size_t(smem), stream>>>(p);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void mla_absorb_queries(const float* q, int64_t T, int H, int dn, int dv, int R,
                        const uint16_t* kv_b, float* q_tilde, cudaStream_t stream) {
  SPARKGLM_ASSERT(R % kColsPerBlock == 0 && dn % 4 == 0 && dn > 0 && dn <= 512 && H > 0 &&
                      H <= 65535 && reinterpret_cast<uintptr_t>(q) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(kv_b) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(q_tilde) % 16 == 0,
                  "mla_absorb_queries: R must be a multiple of 64, dn of 4 (<= 512), pointers "
                  "16-byte aligned");
  if (T <= 0) return;
  SPARKGLM_ASSERT((T + 63) / 64 <= 65535, "mla_absorb_queries: too many rows");
  const AbsorbParams p{q, kv_b, q_tilde, T, H, dn, dv, R};
  // The row tile only sets how many rows share a staged W tile; each element's chain is the same.
  if (T <= 4) {
    launch_absorb_decode(p, stream);
  } else if (T <= 16) {
    launch_absorb<16>(p, stream);
  } else if (T <= 32) {
    launch_absorb<32>(p, stream);
  } else {
    launch_absorb<64>(p, stream);
  }
}

void mla_up_values(const float* o_bar, int64_t T, int H, int dn, int dv, int R,
                   const uint16_t* kv_b, float* o, uint16_t* o_bf16, cudaStream_t stream) {
  SPARKGLM_ASSERT(H > 0 && dv > 0 && R % 8 == 0 && (int64_t(dn) * R) % 8 == 0,
                  "mla_up_values: R must be a multiple of 8");
  // Head h is batch entry h: x = ō_h (row stride H*R), W = W_vb,h, y = o[:, h*dv ..].
  const int64_t hr = int64_t(H) * R;
  const lane_linear::Params p{
      o_bar, hr, R, kv_b + int64_t(dn) * R, int64_t(dn + dv) * R, o, o_bf16, int64_t(H) * dv, dv,
      T,     dv, R};
  lane_linear::run<uint16_t>(p, H, stream);
}

// Head h is batch entry h: X_h = q[:, h*dn ..] [T, dn] (row stride H*dn), W_kb,h [dn, R] used
// as [k, n], Y_h = q~[:, h, :] [T, R] (row stride H*R).
void mla_absorb_queries_tc(const float* q, int64_t T, int H, int dn, int dv, int R,
                           const uint16_t* kv_b, uint16_t* q_bf16, float* q_tilde, Gemm& gemm,
                           cudaStream_t stream) {
  SPARKGLM_ASSERT(H > 0 && dn > 0 && dv >= 0 && R > 0, "mla_absorb_queries_tc: bad shape");
  if (T <= 0) return;
  cast_f32_to_bf16(q, T * H * dn, q_bf16, stream);
  BatchedGemmArgs a;
  a.m = T, a.n = R, a.k = dn, a.batches = H;
  a.x = q_bf16, a.x_ld = int64_t(H) * dn, a.x_batch = dn;
  a.w = kv_b, a.w_ld = R, a.w_batch = int64_t(dn + dv) * R, a.w_kn = true;
  a.y = q_tilde, a.y_ld = int64_t(H) * R, a.y_batch = R, a.y_bf16 = false;
  gemm.batched(a, stream);
}

// Head h is batch entry h: X_h = ō[:, h, :] [T, R] (row stride H*R), W_vb,h [dv, R] in the
// nn.Linear layout, Y_h = o[:, h*dv ..] [T, dv] (row stride H*dv).
void mla_up_values_tc(const float* o_bar, int64_t T, int H, int dn, int dv, int R,
                      const uint16_t* kv_b, uint16_t* o_bar_bf16, uint16_t* o_bf16, Gemm& gemm,
                      cudaStream_t stream) {
  SPARKGLM_ASSERT(H > 0 && dn >= 0 && dv > 0 && R > 0, "mla_up_values_tc: bad shape");
  if (T <= 0) return;
  cast_f32_to_bf16(o_bar, T * H * R, o_bar_bf16, stream);
  BatchedGemmArgs a;
  a.m = T, a.n = dv, a.k = R, a.batches = H;
  a.x = o_bar_bf16, a.x_ld = int64_t(H) * R, a.x_batch = R;
  a.w = kv_b + int64_t(dn) * R, a.w_ld = R, a.w_batch = int64_t(dn + dv) * R, a.w_kn = false;
  a.y = o_bf16, a.y_ld = int64_t(H) * dv, a.y_batch = dv, a.y_bf16 = true;
  gemm.batched(a, stream);
}

}  // namespace sparkglm::cuda
