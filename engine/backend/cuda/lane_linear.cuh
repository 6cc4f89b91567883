#pragma once
// y = x W^T in cpu::linear's reduction order (cpu/linear.h), so that the device result equals the
// CPU reference bit for bit and never depends on the batch: each output y[i][j] accumulates 8
// lanes, lane l taking k = l, l+8, ... in increasing k with one FMA each from +0, and the lanes
// are summed ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). Both kernels below keep exactly that per-element
// arithmetic; they differ only in how they reuse W and x.
//
// W is FP32 or BF16 (widened exactly). A batch index b (blockIdx.z) offsets x, W and y, so one
// launch runs per-head slices (mla_up_values) as well as a plain projection (linear_f32).
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda::lane_linear {

inline constexpr int kLanes = 8;
inline constexpr int kMaxSmallRows = 32;  // rows handled by the weight-streaming kernel

struct Params {
  const float* x;  // x row i of batch b: x + b * x_batch + i * ldx, k values
  int64_t ldx, x_batch;
  const void* w;  // W row j of batch b: w + b * w_batch + j * k, k values (FP32 or BF16)
  int64_t w_batch;
  float* y;          // y[i][j] of batch b: y + b * y_batch + i * ldy + j
  uint16_t* y_bf16;  // the same as BF16 bits, or null
  int64_t ldy, y_batch;
  int64_t m, n, k;  // x rows, W rows, reduction length (16-byte W rows: k * sizeof(W) % 16 == 0)
};

__device__ __forceinline__ float widen(float w) {
  return w;
}
__device__ __forceinline__ float widen(uint16_t w) {
  return bf16_bits_to_f32(w);
}

// The contract's lane sum for the 8 lanes of one output held by 8 consecutive threads (lane 0 of
// each group gets it): xor 4 forms l0+l4, l2+l6, ...; xor 2 the pairs of those; xor 1 the total.
__device__ __forceinline__ float reduce_lane_group(float v) {
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 4));
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
  return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
}

// The same sum for 8 lanes held by one thread.
__device__ __forceinline__ float reduce_lanes(const float* l) {
  return __fadd_rn(__fadd_rn(__fadd_rn(l[0], l[4]), __fadd_rn(l[2], l[6])),
                   __fadd_rn(__fadd_rn(l[1], l[5]), __fadd_rn(l[3], l[7])));
}

// Copies `count` 16-byte vectors into shared memory, each thread issuing kBatch loads before
// storing any: a plain loop would wait out one memory latency per vector.
// at(v): the global address of vector v; dst: shared memory.
template <int kBatch, typename At>
__device__ __forceinline__ void stage_vectors(uint4* dst, int64_t count, At at) {
  for (int64_t base = threadIdx.x; base < count; base += int64_t(kBatch) * blockDim.x) {
    uint4 r[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t v = base + int64_t(u) * blockDim.x;
      if (v < count) r[u] = load_stream(at(v));
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t v = base + int64_t(u) * blockDim.x;
      if (v < count) dst[v] = r[u];
    }
  }
}

__device__ __forceinline__ void store(const Params& p, int64_t b, int64_t i, int64_t j, float v) {
  const int64_t at = b * p.y_batch + i * p.ldy + j;
  p.y[at] = v;
  if (p.y_bf16) p.y_bf16[at] = f32_to_bf16_bits(v);
}

// m <= 32 (decode): a block stages `rows` whole W rows in shared memory with many loads in
// flight per thread (the kernel is a stream of weights), and, when x_in_smem, the x rows
// transposed ([k][ldxs]: a thread's kX consecutive x rows at one k are one vector read). 256
// threads = 32 groups of 8 lanes; group s takes W row s % rows and x rows xg * kX .. + kX - 1
// with xg = s / rows.
// Grid: (ceil(n / rows), 1, batch); dynamic shared memory: small_smem_bytes.
// Floats per k of the transposed x: the rows up to the last thread's kx, plus 4 when read as
// vectors (the 8 lanes' k rows then start 4 banks apart).
__host__ __device__ inline int64_t x_stride(int64_t m, int kx) {
  const int64_t rows = (m + kx - 1) / kx * kx;
  return kx % 4 == 0 ? rows + 4 : rows;
}
template <typename TW>
inline size_t small_smem_bytes(const Params& p, int rows, int kx, bool x_in_smem) {
  return size_t(rows) * size_t(p.k) * sizeof(TW) +
         (x_in_smem ? size_t(p.k) * size_t(x_stride(p.m, kx)) * 4 : 0);
}

template <typename TW, int kX>
__global__ void __launch_bounds__(256)
    small_kernel(const __grid_constant__ Params p, int rows, bool x_in_smem) {
  extern __shared__ __align__(16) unsigned char smem[];
  TW* ws = reinterpret_cast<TW*>(smem);
  float* xs = reinterpret_cast<float*>(smem + int64_t(rows) * p.k * int64_t(sizeof(TW)));
  const int64_t b = blockIdx.z, j0 = int64_t(blockIdx.x) * rows, ldxs = x_stride(p.m, kX);
  const int have = int(min(int64_t(rows), p.n - j0));
  const uint4* w =
      reinterpret_cast<const uint4*>(static_cast<const TW*>(p.w) + b * p.w_batch + j0 * p.k);
  stage_vectors<8>(reinterpret_cast<uint4*>(ws), int64_t(have) * p.k * int64_t(sizeof(TW)) / 16,
                   [&](int64_t v) { return w + v; });
  // W is the model's (no kernel writes it): staged before the wait, while the kernel ahead still
  // runs; x is that kernel's, read past L1 after it (pdl.cuh).
  pdl_wait();
  pdl_trigger();
  const float* x = p.x + b * p.x_batch;
  if (x_in_smem) {
    // Adjacent threads take adjacent rows, so the transposed stores hit distinct banks.
    const int64_t count = p.m * (p.k / 4);
    for (int64_t base = threadIdx.x; base < count; base += 4 * 256) {
      float4 r[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t v = base + 256 * u;
        if (v < count)
          r[u] = __ldcg(reinterpret_cast<const float4*>(x + (v % p.m) * p.ldx) + v / p.m);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t v = base + 256 * u, i = v % p.m, c = (v / p.m) * 4;
        if (v >= count) continue;
        xs[(c + 0) * ldxs + i] = r[u].x, xs[(c + 1) * ldxs + i] = r[u].y;
        xs[(c + 2) * ldxs + i] = r[u].z, xs[(c + 3) * ldxs + i] = r[u].w;
      }
    }
  }
  __syncthreads();

  const int lane = threadIdx.x & 7, group = threadIdx.x >> 3;
  const int r = group % rows, xg = group / rows;
  const int64_t i0 = int64_t(xg) * kX;  // this thread's first x row
  float acc[kX];
#pragma unroll
  for (int u = 0; u < kX; ++u) acc[u] = 0.0f;
  // Rows past m compute on whatever the buffers hold and are never stored.
  if (r < have && i0 < p.m) {
    const TW* wr = ws + int64_t(r) * p.k;
    if (x_in_smem) {
#pragma unroll 4
      for (int64_t kk = lane; kk < p.k; kk += kLanes) {
        const float wv = widen(wr[kk]);
        const float* xk = xs + kk * ldxs + i0;
        if constexpr (kX % 4 == 0) {
#pragma unroll
          for (int u = 0; u < kX; u += 4) {
            const float4 xv = *reinterpret_cast<const float4*>(xk + u);
            acc[u] = fmaf(xv.x, wv, acc[u]);
            acc[u + 1] = fmaf(xv.y, wv, acc[u + 1]);
            acc[u + 2] = fmaf(xv.z, wv, acc[u + 2]);
            acc[u + 3] = fmaf(xv.w, wv, acc[u + 3]);
          }
        } else {
#pragma unroll
          for (int u = 0; u < kX; ++u) acc[u] = fmaf(xk[u], wv, acc[u]);
        }
      }
    } else {
#pragma unroll 8
      for (int64_t kk = lane; kk < p.k; kk += kLanes) {
        const float wv = widen(wr[kk]);
#pragma unroll
        for (int u = 0; u < kX; ++u)
          if (i0 + u < p.m) acc[u] = fmaf(__ldcg(x + (i0 + u) * p.ldx + kk), wv, acc[u]);
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kX; ++u) {
    const float s = reduce_lane_group(acc[u]);
    if (lane == 0 && r < have && i0 + u < p.m) store(p, b, i0 + u, j0 + r, s);
  }
}

// m > 32 (prefill): a 64 x 32 output tile per block of 256 threads; a thread owns 4 x rows x 2 W
// rows x 8 lanes of accumulators. k advances in tiles of 32 (4 chunks of 8: chunk value e goes to
// lane e), staged in shared memory (W widened to FP32) with the next tile's loads in flight.
inline constexpr int kTileM = 64, kTileN = 32, kTileK = 32, kLdS = kTileK + 4;  // +4: no conflicts

template <typename TW>
struct TileLoad {
  float4 x[2];  // 2 x 4 values of x
  uint4 w;      // 4 FP32 or 8 BF16 values of W
};

template <typename TW>
__device__ __forceinline__ void load_tile(const Params& p, int64_t b, int64_t i0, int64_t j0,
                                          int64_t k0, TileLoad<TW>& t) {
  const float* x = p.x + b * p.x_batch;
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int v = threadIdx.x + 256 * q, row = v / 8, c = (v % 8) * 4;
    const int64_t i = i0 + row;
    t.x[q] = (i < p.m && k0 + c < p.k)
                 ? __ldg(reinterpret_cast<const float4*>(x + i * p.ldx + k0 + c))
                 : make_float4(0, 0, 0, 0);
  }
  // A 16-byte vector of W: FP32 thread v takes row v / 8, BF16 thread v < 128 row v / 4.
  constexpr int kPerVec = 16 / int(sizeof(TW)), kVecsPerRow = kTileK / kPerVec;
  const int row = threadIdx.x / kVecsPerRow, c = (threadIdx.x % kVecsPerRow) * kPerVec;
  const int64_t j = j0 + row;
  const TW* w = static_cast<const TW*>(p.w) + b * p.w_batch;
  t.w = (row < kTileN && j < p.n && k0 + c < p.k)
            ? __ldg(reinterpret_cast<const uint4*>(w + j * p.k + k0 + c))
            : make_uint4(0, 0, 0, 0);
}

template <typename TW>
__device__ __forceinline__ void store_tile(const TileLoad<TW>& t, float* xs, float* ws) {
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int v = threadIdx.x + 256 * q, row = v / 8, c = (v % 8) * 4;
    *reinterpret_cast<float4*>(xs + row * kLdS + c) = t.x[q];
  }
  constexpr int kPerVec = 16 / int(sizeof(TW)), kVecsPerRow = kTileK / kPerVec;
  const int row = threadIdx.x / kVecsPerRow, c = (threadIdx.x % kVecsPerRow) * kPerVec;
  if (row >= kTileN) return;
  float* dst = ws + row * kLdS + c;
  if constexpr (sizeof(TW) == 4) {
    *reinterpret_cast<uint4*>(dst) = t.w;
  } else {
    const uint32_t u[4] = {t.w.x, t.w.y, t.w.z, t.w.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      dst[2 * e] = __uint_as_float(u[e] << 16);
      dst[2 * e + 1] = __uint_as_float(u[e] & 0xffff0000u);
    }
  }
}

// Grid: (ceil(n / 32), ceil(m / 64), batch).
template <typename TW>
__global__ void __launch_bounds__(256) tiled_kernel(const __grid_constant__ Params p) {
  __shared__ __align__(16) float xs[2][kTileM * kLdS];
  __shared__ __align__(16) float ws[2][kTileN * kLdS];
  const int64_t b = blockIdx.z, i0 = int64_t(blockIdx.y) * kTileM,
                j0 = int64_t(blockIdx.x) * kTileN;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;  // W rows 2tx, 2tx+1; x rows 4ty..4ty+3
  float acc[4][2][kLanes];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int c = 0; c < 2; ++c)
#pragma unroll
      for (int l = 0; l < kLanes; ++l) acc[a][c][l] = 0.0f;

  TileLoad<TW> next;
  load_tile<TW>(p, b, i0, j0, 0, next);
  store_tile<TW>(next, xs[0], ws[0]);
  __syncthreads();
  const int64_t tiles = (p.k + kTileK - 1) / kTileK;
  for (int64_t t = 0; t < tiles; ++t) {
    const int buf = int(t & 1);
    if (t + 1 < tiles) load_tile<TW>(p, b, i0, j0, (t + 1) * kTileK, next);
    const int valid = int(min(int64_t(kTileK), p.k - t * kTileK));  // a multiple of 4
    const float* xb = xs[buf] + ty * 4 * kLdS;
    const float* wb = ws[buf] + tx * 2 * kLdS;
#pragma unroll
    for (int ch = 0; ch < kTileK / kLanes; ++ch) {
      float xv[4][kLanes], wv[2][kLanes];
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        *reinterpret_cast<float4*>(&xv[a][0]) =
            *reinterpret_cast<const float4*>(xb + a * kLdS + ch * kLanes);
        *reinterpret_cast<float4*>(&xv[a][4]) =
            *reinterpret_cast<const float4*>(xb + a * kLdS + ch * kLanes + 4);
      }
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        *reinterpret_cast<float4*>(&wv[c][0]) =
            *reinterpret_cast<const float4*>(wb + c * kLdS + ch * kLanes);
        *reinterpret_cast<float4*>(&wv[c][4]) =
            *reinterpret_cast<const float4*>(wb + c * kLdS + ch * kLanes + 4);
      }
      if (valid == kTileK) {
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int c = 0; c < 2; ++c)
#pragma unroll
            for (int l = 0; l < kLanes; ++l) acc[a][c][l] = fmaf(xv[a][l], wv[c][l], acc[a][c][l]);
      } else {
        // The last, partial tile: lanes past k take no FMA (a +0 term would turn -0 into +0).
#pragma unroll
        for (int l = 0; l < kLanes; ++l) {
          if (ch * kLanes + l >= valid) continue;
#pragma unroll
          for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int c = 0; c < 2; ++c) acc[a][c][l] = fmaf(xv[a][l], wv[c][l], acc[a][c][l]);
        }
      }
    }
    if (t + 1 < tiles) {
      store_tile<TW>(next, xs[buf ^ 1], ws[buf ^ 1]);  // the other buffer: nobody reads it now
    }
    __syncthreads();
  }
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int64_t i = i0 + ty * 4 + a, j = j0 + tx * 2 + c;
      if (i < p.m && j < p.n) store(p, b, i, j, reduce_lanes(acc[a][c]));
    }
}

template <typename TW, int kX>
void launch_small(const Params& p, int64_t batch, int rows, bool x_in_smem, cudaStream_t stream) {
  const size_t smem = small_smem_bytes<TW>(p, rows, kX, x_in_smem);
  if (smem > 48 * 1024)
    SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(
        small_kernel<TW, kX>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid(unsigned((p.n + rows - 1) / rows), 1, unsigned(batch));
  launch_dependent(small_kernel<TW, kX>, grid, 256, smem, stream, p, rows, x_in_smem);
}

template <typename TW, int kX>
void pick_staging(const Params& p, int64_t batch, int rows, cudaStream_t stream) {
  const bool x_in_smem = p.k * x_stride(p.m, kX) * 4 <= 64 * 1024;
  launch_small<TW, kX>(p, batch, rows, x_in_smem, stream);
}

// Runs y = x W^T for `batch` slices. The small kernel's W rows per block fill about 16 KiB of
// shared memory for up to 8 x rows, 64 KiB beyond (each block then re-reads x fewer times), at
// least 1 and at most 32 rows; x rows are staged beside them when they take at most 64 KiB.
template <typename TW>
void run(const Params& p, int64_t batch, cudaStream_t stream) {
  SPARKGLM_ASSERT(
      (p.k * int64_t(sizeof(TW))) % 16 == 0 && p.ldx % 4 == 0 && p.x_batch % 4 == 0 &&
          reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
          reinterpret_cast<uintptr_t>(p.w) % 16 == 0 && (p.w_batch * int64_t(sizeof(TW))) % 16 == 0,
      "lane_linear: W rows must be whole 16-byte vectors, x strides multiples of 4 and x, "
      "W 16-byte aligned");
  SPARKGLM_ASSERT(batch <= 65535 && p.k * int64_t(sizeof(TW)) <= 96 * 1024,
                  "lane_linear: batch or k out of range");
  if (p.m > kMaxSmallRows) {
    const dim3 grid(unsigned((p.n + kTileN - 1) / kTileN), unsigned((p.m + kTileM - 1) / kTileM),
                    unsigned(batch));
    SPARKGLM_ASSERT(grid.y <= 65535, "lane_linear: too many rows");
    tiled_kernel<TW><<<grid, 256, 0, stream>>>(p);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const int64_t w_budget = p.m <= 8 ? 16 * 1024 : 64 * 1024, row_bytes = p.k * int64_t(sizeof(TW));
  int rows = 1;
  // At most 16 x rows per thread: 32 accumulators would cost a block per SM in registers.
  while (rows < 32 && int64_t(rows) * 2 * row_bytes <= w_budget &&
         (p.m + 32 / (rows * 2) - 1) / (32 / (rows * 2)) <= 16)
    rows *= 2;
  const int64_t per_thread = (p.m + (32 / rows) - 1) / (32 / rows);
  if (per_thread <= 1) {
    pick_staging<TW, 1>(p, batch, rows, stream);
  } else if (per_thread <= 2) {
    pick_staging<TW, 2>(p, batch, rows, stream);
  } else if (per_thread <= 4) {
    pick_staging<TW, 4>(p, batch, rows, stream);
  } else if (per_thread <= 8) {
    pick_staging<TW, 8>(p, batch, rows, stream);
  } else {
    pick_staging<TW, 16>(p, batch, rows, stream);
  }
}

}  // namespace sparkglm::cuda::lane_linear
