#include "engine/backend/cuda/grouped_gemm.h"

#include <string>

#include "engine/backend/cuda/cp_async.cuh"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kThreads = 256;  // 8 warps: 2 along the tile's rows by 4 along its columns
constexpr int kTileN = 128;    // weight rows per tile (SwiGLU: 64 gate rows, then their 64 up rows)
constexpr int kTileK = 32;     // k per pipeline stage: 4 chunks of 16 bytes per row
constexpr int kStages = 4;
// Shared-memory row stride in BF16: 80 bytes, so the 8 rows an ldmatrix phase reads start at
// 0, 80, 160, ... = 16-byte slots 0, 5, 2, 7, 4, 1, 6, 3 of a 128-byte bank line: no conflicts.
constexpr int kLd = kTileK + 8;

template <int kTileM>
constexpr int smem_bytes() {
  return kStages * (kTileM + kTileN) * kLd * 2;  // 128 rows: 80 KiB; 64 rows: 60 KiB
}

struct Params {
  GroupedGemmArgs g;
  int n_tiles;  // column tiles per row tile
  float limit;  // SwiGLU clamp
  float* y;     // plain: [rows, n] FP32
  uint16_t* h;  // SwiGLU: [rows, n] BF16
};

// Four 8x8 BF16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and register i of
// lane l holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix i (lower column in the
// low half): the mma.m16n8k16 fragment layout (see mma_bf16 in device_math.cuh).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// cpu::swiglu_forward's activation: std::min / std::clamp's comparisons, so a NaN passes through.
__device__ __forceinline__ float swiglu(float gv, float uv, float limit) {
  if (limit > 0.0f) {
    gv = limit < gv ? limit : gv;
    uv = uv < -limit ? -limit : (limit < uv ? limit : uv);
  }
  return gv / (1.0f + expf(-gv)) * uv;
}

// One block of 1024 threads: an exclusive scan of the groups' row-tile counts, 1024 at a time.
__global__ void __launch_bounds__(1024)
    plan_kernel(const int32_t* offsets, int groups, int tile_rows, int32_t* tile_offsets) {
  __shared__ int32_t warp_total[32];
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  int32_t carry = 0;  // every thread keeps the same running total
  for (int base = 0; base < groups; base += 1024) {
    const int gi = base + int(threadIdx.x);
    const int32_t v = gi < groups ? (offsets[gi + 1] - offsets[gi] + tile_rows - 1) / tile_rows : 0;
    int32_t s = v;  // inclusive scan within the warp
    for (int d = 1; d < 32; d <<= 1) {
      const int32_t u = __shfl_up_sync(kFull, s, d);
      if (lane >= d) s += u;
    }
    if (lane == 31) warp_total[warp] = s;
    __syncthreads();
    int32_t before = 0, chunk = 0;
    for (int w = 0; w < 32; ++w) {
      const int32_t t = warp_total[w];
      if (w < warp) before += t;
      chunk += t;
    }
    if (gi < groups) tile_offsets[gi] = carry + before + s - v;
    carry += chunk;
    __syncthreads();  // the next chunk rewrites warp_total
  }
  if (threadIdx.x == 0) tile_offsets[groups] = carry;
}

// One block per tile (kTileM grouped rows x 128 weight rows), 4-stage cp.async pipeline over k.
// Warp (wm, wn) owns rows wm * kTileM / 2 + [0, kTileM / 2) and four n8 column blocks j: plain,
// tile columns wn * 32 + 8 j; SwiGLU, gate rows wn * 16 + 8 j (j = 0, 1) and the up rows 64 later
// (j = 2, 3), so that a lane holds the gate and up sums of the same output column.
template <int kTileM, bool kSwiGlu>
__global__ void __launch_bounds__(kThreads, 2)
    grouped_gemm_kernel(const __grid_constant__ Params p) {
  constexpr int kWarpM = kTileM / 2, kFragsM = kWarpM / 16;
  constexpr int kChunks = kTileK / 8;  // 16-byte chunks per tile row and stage
  constexpr int kLoadsA = kTileM * kChunks / kThreads, kLoadsB = kTileN * kChunks / kThreads;
  static_assert(kLoadsA * kThreads == kTileM * kChunks && kLoadsB * kThreads == kTileN * kChunks,
                "every thread copies whole chunks");
  const GroupedGemmArgs& g = p.g;

  // The tile: blocks run group by group, then column tile, then row tile. tile_offsets[G] * n_tiles
  // real tiles; the grid's upper bound leaves the rest to exit.
  const int tile = int(blockIdx.x), q = tile / p.n_tiles;
  if (q >= g.tile_offsets[g.groups]) return;
  int lo = 0, hi = g.groups;  // the last group with tile_offsets[lo] <= q (it has tiles)
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (g.tile_offsets[mid] <= q)
      lo = mid;
    else
      hi = mid;
  }
  const int first = g.tile_offsets[lo], m_tiles = g.tile_offsets[lo + 1] - first;
  const int local = tile - first * p.n_tiles;
  const int n_tile = local / m_tiles, m_tile = local % m_tiles;
  const int32_t row0 = g.offsets[lo] + m_tile * kTileM;        // first grouped row
  const int32_t rows = min(kTileM, g.offsets[lo + 1] - row0);  // >= 1
  const uint16_t* w = lo < g.w_count ? g.w[lo] : g.w_last;

  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* sa = smem;                           // [kStages][kTileM][kLd]
  uint16_t* sb = smem + kStages * kTileM * kLd;  // [kStages][kTileN][kLd]
  const int tid = int(threadIdx.x), chunk = tid & (kChunks - 1);

  // The rows this thread copies (tile row (tid + i * kThreads) / kChunks, the same chunk column
  // every time); rows past the group or the weight are zero-filled, never read.
  const uint16_t* a_src[kLoadsA];
  bool a_ok[kLoadsA];
#pragma unroll
  for (int i = 0; i < kLoadsA; ++i) {
    const int r = (tid + i * kThreads) / kChunks;
    a_ok[i] = r < rows;
    const int64_t src = !a_ok[i] ? 0 : (g.a_rows ? g.a_rows[row0 + r] : row0 + r);
    a_src[i] = g.a + src * g.k + chunk * 8;
  }
  const uint16_t* b_src[kLoadsB];
  bool b_ok[kLoadsB];
#pragma unroll
  for (int i = 0; i < kLoadsB; ++i) {
    const int r = (tid + i * kThreads) / kChunks;
    int64_t row;
    if (kSwiGlu) {
      const int64_t col = int64_t(n_tile) * (kTileN / 2) + (r & (kTileN / 2 - 1));
      b_ok[i] = col < g.n;
      row = col + (r >= kTileN / 2 ? g.n : 0);
    } else {
      row = int64_t(n_tile) * kTileN + r;
      b_ok[i] = row < g.n;
    }
    b_src[i] = w + (b_ok[i] ? row : 0) * g.k + chunk * 8;
  }
  auto load = [&](int stage, int kt) {
    const int64_t k0 = int64_t(kt) * kTileK;
    const bool k_ok = k0 + chunk * 8 < g.k;  // k is a multiple of 8: a chunk is all in or out
#pragma unroll
    for (int i = 0; i < kLoadsA; ++i) {
      const int r = (tid + i * kThreads) / kChunks;
      const bool ok = a_ok[i] && k_ok;
      cp_async16(smem_addr(sa + (stage * kTileM + r) * kLd + chunk * 8), ok ? a_src[i] + k0 : g.a,
                 ok);
    }
#pragma unroll
    for (int i = 0; i < kLoadsB; ++i) {
      const int r = (tid + i * kThreads) / kChunks;
      const bool ok = b_ok[i] && k_ok;
      cp_async16(smem_addr(sb + (stage * kTileN + r) * kLd + chunk * 8), ok ? b_src[i] + k0 : w,
                 ok);
    }
  };

  const int lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;
  float acc[kFragsM][4][4] = {};
  const int ktiles = int((g.k + kTileK - 1) / kTileK);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();  // empty groups too: the wait below counts groups
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    // Groups committed so far: kStages - 1 + kt; at most kStages - 2 pending means stage kt's
    // landed (for this thread; the barrier makes it every thread's). The barrier also ends every
    // warp's reads of the slot the next load overwrites, which iteration kt - 1 consumed.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int next = kt + kStages - 1;
    if (next < ktiles) load(next % kStages, next);
    cp_async_commit();
    const uint16_t* ta = sa + (kt % kStages) * kTileM * kLd;
    const uint16_t* tb = sb + (kt % kStages) * kTileN * kLd;
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      // A (rows x k, row-major in shared memory): matrices 0..3 = rows 0-7 / 8-15 at k 0-7, then
      // rows 0-7 / 8-15 at k 8-15, i.e. a0..a3; lane l addresses row l % 16, k 8 (l / 16).
      uint32_t af[kFragsM][4];
#pragma unroll
      for (int mi = 0; mi < kFragsM; ++mi)
        ldmatrix_x4(af[mi], smem_addr(ta + (wm * kWarpM + mi * 16 + (lane & 15)) * kLd + kk +
                                      (lane >> 4) * 8));
      // B = W^T: W's rows (n) are B's columns and hold k contiguously, so an 8x8 matrix of W rows
      // is b0 (k 0-7) or b1 (k 8-15) of one n8 block. Matrices 0..3 = (n 0-7, k 0-7), (n 0-7,
      // k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15); lane l addresses n l % 8 + 8 (l / 16), k
      // 8 ((l / 8) % 2).
      uint32_t bf[4][2];
#pragma unroll
      for (int pr = 0; pr < 2; ++pr) {
        const int nb = kSwiGlu ? pr * (kTileN / 2) + wn * 16 : wn * 32 + pr * 16;
        uint32_t r[4];
        ldmatrix_x4(r, smem_addr(tb + (nb + (lane & 7) + (lane >> 4) * 8) * kLd + kk +
                                 ((lane >> 3) & 1) * 8));
        bf[2 * pr][0] = r[0], bf[2 * pr][1] = r[1];
        bf[2 * pr + 1][0] = r[2], bf[2 * pr + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma_bf16(acc[mi][j], af[mi][0], af[mi][1], af[mi][2], af[mi][3], bf[j][0], bf[j][1]);
    }
  }
  cp_async_wait<0>();

  // Accumulator c of n8 block j: c[0], c[1] = row lane / 4, columns 2 (lane % 4) + 0, 1;
  // c[2], c[3] = row lane / 4 + 8, the same columns.
  const int gq = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = wm * kWarpM + mi * 16 + gq + half * 8;
      if (r >= rows) continue;
      const int64_t row = int64_t(row0) + r;
      if (kSwiGlu) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int64_t col = int64_t(n_tile) * (kTileN / 2) + wn * 16 + j * 8 + 2 * t4;
          if (col >= g.n) continue;  // n is even: col + 1 < n too
          const uint32_t h0 =
              f32_to_bf16_bits(swiglu(acc[mi][j][2 * half], acc[mi][j + 2][2 * half], p.limit));
          const uint32_t h1 = f32_to_bf16_bits(
              swiglu(acc[mi][j][2 * half + 1], acc[mi][j + 2][2 * half + 1], p.limit));
          *reinterpret_cast<uint32_t*>(p.h + row * g.n + col) = h0 | (h1 << 16);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t col = int64_t(n_tile) * kTileN + wn * 32 + j * 8 + 2 * t4;
          if (col >= g.n) continue;
          *reinterpret_cast<float2*>(p.y + row * g.n + col) =
              make_float2(acc[mi][j][2 * half], acc[mi][j][2 * half + 1]);
        }
      }
    }
}

void check(const GroupedGemmArgs& a, const void* out) {
  if (a.groups <= 0 || (a.tile_rows != 64 && a.tile_rows != 128) || a.n <= 0 || a.n % 8 != 0 ||
      a.k <= 0 || a.k % 8 != 0 || a.max_rows < 0 || !a.offsets || !a.tile_offsets || !a.a ||
      (a.w_count > 0 && !a.w) || !out || reinterpret_cast<uintptr_t>(a.a) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 8 != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "grouped_gemm: groups > 0, tile_rows 64 or 128, n and k positive multiples of 8, "
                "a 16-byte aligned and every pointer set (tile_rows " +
                    std::to_string(a.tile_rows) + ", n " + std::to_string(a.n) + ", k " +
                    std::to_string(a.k) + ")");
}

template <int kTileM, bool kSwiGlu>
void launch(const Params& p, cudaStream_t stream) {
  // sum over groups of ceil(rows_g / kTileM) < max_rows / kTileM + groups.
  const int64_t blocks = (p.g.max_rows / kTileM + p.g.groups) * int64_t(p.n_tiles);
  if (blocks > int64_t(0x7fffffff))
    throw Error(ErrorKind::kInvalidArgument, "grouped_gemm: too many tiles for one grid");
  constexpr int smem = smem_bytes<kTileM>();
  SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(grouped_gemm_kernel<kTileM, kSwiGlu>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  grouped_gemm_kernel<kTileM, kSwiGlu><<<unsigned(blocks), kThreads, smem, stream>>>(p);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <bool kSwiGlu>
void launch_rows(const Params& p, cudaStream_t stream) {
  if (p.g.tile_rows == 64)
    launch<64, kSwiGlu>(p, stream);
  else
    launch<128, kSwiGlu>(p, stream);
}

}  // namespace

void grouped_gemm_plan(const int32_t* offsets, int groups, int tile_rows, int32_t* tile_offsets,
                       cudaStream_t stream) {
  if (groups <= 0 || (tile_rows != 64 && tile_rows != 128))
    throw Error(ErrorKind::kInvalidArgument, "grouped_gemm_plan: groups > 0, tile_rows 64 or 128");
  plan_kernel<<<1, 1024, 0, stream>>>(offsets, groups, tile_rows, tile_offsets);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void grouped_gemm(const GroupedGemmArgs& a, float* y, cudaStream_t stream) {
  check(a, y);
  if (a.max_rows == 0) return;
  Params p{a, int((a.n + kTileN - 1) / kTileN), 0.0f, y, nullptr};
  launch_rows<false>(p, stream);
}

void grouped_gemm_swiglu(const GroupedGemmArgs& a, float clamp_limit, uint16_t* h,
                         cudaStream_t stream) {
  check(a, h);
  if (a.max_rows == 0) return;
  Params p{a, int((a.n + kTileN / 2 - 1) / (kTileN / 2)), clamp_limit, nullptr, h};
  launch_rows<true>(p, stream);
}

}  // namespace sparkglm::cuda
