#include "engine/backend/cuda/gemv_bf16.h"

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "engine/backend/cuda/cp_async.cuh"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kWarps = 8;  // warps per block
// Output rows (of W) per warp of the CUDA-core kernel with a tile of kMt rows of x: each W chunk
// feeds kMt rows and each x chunk kWarpRows<kMt> rows, and a warp ends with one warp sum per
// (W row, x row), so wider tiles take fewer W rows a warp and more blocks. A sum's order does not
// depend on either count (lane l always takes the chunks l, l + 32, ... of its row).
template <int kMt>
constexpr int kWarpRows = kMt == 1 ? 4 : (kMt == 2 ? 2 : 1);
constexpr int64_t kGemvTargetBlocks = 1024;  // enough blocks to keep every SM's loads in flight

struct GemvParams {
  const uint16_t* x;  // [m, k]
  const uint16_t* w;  // [n, k]
  float* y;           // [m, n]; with splits > 1 the partials [splits, m, n]
  int64_t m, n, k;
  int splits = 1;  // k slices (the MMA kernels only)
};

__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}

// Block `block` of the CUDA-core GEMV (grid (gemv_blocks<kMt>(n), ceil(m / kMt))). One warp:
// kWarpRows<kMt> rows of W against up to kMt rows of x; lane l takes the 8-value chunks l,
// l+32, l+64, ... Both kernels below run this code, so a part of a group gets the bits of its own
// launch.
template <int kMt>
__device__ __forceinline__ void gemv_block(const GemvParams& p, int64_t block) {
  constexpr int kRowsPerWarp = kWarpRows<kMt>;
  const int lane = threadIdx.x & 31;
  const int64_t n0 = (block * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  const int64_t m0 = int64_t(blockIdx.y) * kMt;
  if (n0 >= p.n) return;
  const int rows = int(p.n - n0 < kRowsPerWarp ? p.n - n0 : kRowsPerWarp);
  const int mt = int(p.m - m0 < kMt ? p.m - m0 : kMt);
  const int64_t chunks = p.k / 8;

  float acc[kRowsPerWarp][kMt];  // [rows of W, rows of x]
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int i = 0; i < kMt; ++i) acc[r][i] = 0.0f;

#pragma unroll 2
  for (int64_t c = lane; c < chunks; c += 32) {
    float wf[kRowsPerWarp][8];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      // A missing W row (n not a multiple of the rows a warp) repeats the last one; its sums
      // are not stored.
      const int rr = r < rows ? r : rows - 1;
      unpack8(load_stream(p.w + (n0 + rr) * p.k + c * 8), wf[r]);
    }
    // Every row of the tile is computed, a row past mt on row m0's values (its sums are not
    // stored): with no branch between them, the compiler requests every x row's chunk before
    // any is used, so the rows wait for one memory latency, not one each. Each row's sums take
    // the same fmaf sequence as before, so its bits do not change.
    uint4 xv[kMt];
#pragma unroll
    for (int i = 0; i < kMt; ++i)
      xv[i] = __ldcg(reinterpret_cast<const uint4*>(p.x + (m0 + (i < mt ? i : 0)) * p.k + c * 8));
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      float xf[8];
      unpack8(xv[i], xf);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][i] = fmaf(wf[r][e], xf[e], acc[r][i]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      const float s = warp_sum(acc[r][i]);
      if (lane == (r * kMt + i) % 32 && r < rows && i < mt) p.y[(m0 + i) * p.n + n0 + r] = s;
    }
}

template <int kMt>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const __grid_constant__ GemvParams p) {
  pdl_trigger();
  pdl_wait();  // stays first: Gemm::prefill hands it the dequantize workspace as w
  gemv_block<kMt>(p, blockIdx.x);
}

// Up to kGemvGroupMax GEMVs of one m in one launch: blocks [end[i - 1], end[i]) of grid.x are part
// i's grid.x.
struct GemvGroupParams {
  GemvParams part[kGemvGroupMax];
  int64_t end[kGemvGroupMax];
  int count;
};

template <int kMt>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_group_kernel(const __grid_constant__ GemvGroupParams g) {
  pdl_trigger();
  pdl_wait();
  int i = 0;
  while (i + 1 < g.count && int64_t(blockIdx.x) >= g.end[i]) ++i;
  gemv_block<kMt>(g.part[i], int64_t(blockIdx.x) - (i > 0 ? g.end[i - 1] : 0));
}

// The tensor-core path's geometry (gemv_bf16.h): 4 warps a block, each a contiguous quarter of
// the block's k; 16 W rows a block; the register kernel loads 4 x 32 k ahead.
constexpr int kSplitK = 4;
constexpr int kMmaRows = 16;
constexpr int kStages = 4;  // 32-k blocks of W loaded ahead per warp (kRegisters)
static_assert(kGemvMmaK == 32 * kSplitK * kStages, "a warp's k is a whole number of load rounds");

// The end of a (tile, slice) item, as both MMA kernels finish it: warps 1-3 leave their C
// fragments in `sums` ([kSplitK - 1][kTiles][32][4] floats), and after a block barrier warp 0 adds
// them to its own in warp order and stores rows n0 + g, n0 + g + 8 of y [m, n] (rows past n and
// columns past m are not stored).
template <int kTiles>
__device__ __forceinline__ void add_warp_sums(float* sums, const float (&acc)[kTiles][4],
                                              const GemvParams& p, int64_t n0, float* y) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  if (warp > 0) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) sums[(((warp - 1) * kTiles + j) * 32 + lane) * 4 + e] = acc[j][e];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = acc[j][e];
#pragma unroll
      for (int w = 1; w < kSplitK; ++w) v = v + sums[(((w - 1) * kTiles + j) * 32 + lane) * 4 + e];
      const int64_t n = n0 + g + (e >= 2 ? 8 : 0);
      const int64_t m = j * 8 + t * 2 + (e & 1);
      if (n < p.n && m < p.m) y[m * p.n + n] = v;
    }
}

// GemvKernel::kRegisters: W fragments loaded from global memory into registers.
template <int kTiles>  // ceil(m / 8) column tiles of B
__global__ void __launch_bounds__(kSplitK * 32)
    gemv_mma_kernel(const __grid_constant__ GemvParams p) {
  pdl_trigger();
  __shared__ float partial[kSplitK - 1][kTiles][32][4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x) * kMmaRows;
  const int64_t r0 = min(n0 + g, p.n - 1), r1 = min(n0 + g + 8, p.n - 1);  // clamped loads
  const int64_t k_slice = p.k / p.splits;  // this block's slice of k, split over its warps
  const int64_t k_per_warp = k_slice / kSplitK;
  const int64_t k_begin = blockIdx.y * k_slice + warp * k_per_warp, k_end = k_begin + k_per_warp;
  float* y = p.y + int64_t(blockIdx.y) * p.m * p.n;
  const uint16_t* w0 = p.w + r0 * p.k + t * 8;
  const uint16_t* w1 = p.w + r1 * p.k + t * 8;

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  // kStages k blocks of W are requested before any is used: a decode GEMV is a stream of
  // weights, and only bytes in flight hide the memory latency.
  // The first k blocks are requested before the wait for the kernel ahead (programmatic
  // dependent launch): W is the model's, never written by a kernel; x is read after the wait.
  uint4 wa[kStages], wb[kStages];
  auto load_w = [&](int64_t kb0) {
#pragma unroll
    for (int u = 0; u < kStages; ++u) {
      wa[u] = load_stream(w0 + kb0 + 32 * u);
      wb[u] = load_stream(w1 + kb0 + 32 * u);
    }
  };
  if (k_begin < k_end) load_w(k_begin);
  pdl_wait();
  for (int64_t kb0 = k_begin; kb0 < k_end; kb0 += 32 * kStages) {
    if (kb0 != k_begin) load_w(kb0);
#pragma unroll
    for (int u = 0; u < kStages; ++u) {
      const int64_t kb = kb0 + 32 * u;
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        const int64_t m = j * 8 + g;
        uint4 xv = make_uint4(0, 0, 0, 0);
        if (m < p.m) xv = __ldcg(reinterpret_cast<const uint4*>(p.x + m * p.k + kb + t * 8));
        mma_bf16(acc[j], wa[u].x, wb[u].x, wa[u].y, wb[u].y, xv.x, xv.y);
        mma_bf16(acc[j], wa[u].z, wb[u].z, wa[u].w, wb[u].w, xv.z, xv.w);
      }
    }
  }
  add_warp_sums<kTiles>(&partial[0][0][0][0], acc, p, n0, y);
}

// y[i] = (sum over s, increasing, of partial[s][i]) * scale: the k slices of a split GEMV.
__global__ void sum_splits_kernel(const float* partial, int splits, int64_t count, float scale,
                                  float* y) {
  pdl_trigger();
  pdl_wait();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = __ldcg(partial + i);
    for (int s = 1; s < splits; ++s) v = __fadd_rn(v, __ldcg(partial + s * count + i));
    y[i] = __fmul_rn(v, scale);
  }
}

// GemvKernel::kStream: the same fragments read from shared memory, in a grid of resident blocks.
// Work item i (tile i / splits of 16 W rows, k slice i % splits) goes to block i mod gridDim.x;
// each of its 4 warps streams its quarter of the slice through two shared-memory stages of 256 k
// (8 groups of 32) of the tile's 16 rows, 512 contiguous bytes a row, copied by cp.async 16 bytes
// a lane (one instruction a row, consecutive lanes along it). The next stage is in flight while
// the warp computes this one, across item boundaries too, so a block's stream never drains
// between tiles and the grid ends in one partial wave of stages instead of one of blocks. In a
// stage the 16-byte chunk c of row r sits at chunk c ^ 4 (r & 1): the fragment reads of rows g
// and g + 1 (lanes 4g .. 4g + 7, 16 bytes each) hit the two halves of the 32 banks.
constexpr int kStreamGroups = 8;  // 32-k groups a stage
constexpr int kStreamK = 32 * kStreamGroups;
constexpr int kStreamRowBytes = 2 * kStreamK;
static_assert(kStreamRowBytes == 32 * 16, "a stage's row is one 16-byte copy a lane");
static_assert((kGemvMmaK / kSplitK) % (kStreamK / 2) == 0,
              "a warp's k is whole stages and at most one half stage");
constexpr int kStreamStageBytes = kMmaRows * kStreamRowBytes;  // 8 KB
constexpr int kStreamWarpBytes = 2 * kStreamStageBytes;
// Shared memory of a block: the 4 warps' stages, then warps 1-3's sums of an item.
template <int kTiles>
constexpr int kStreamSmem = kSplitK* kStreamWarpBytes + (kSplitK - 1) * kTiles * 32 * 4 * 4;
constexpr int kStreamBlocksPerSm = 3;  // 3 x 70 KB of shared memory
constexpr int kMaxDevices = 64;

// Byte offset in a stage of row r's 16-byte chunk c.
__device__ __forceinline__ int stage_offset(int r, int c) {
  return r * kStreamRowBytes + 16 * (c ^ ((r & 1) << 2));
}

template <int kTiles>
__global__ void __launch_bounds__(kSplitK * 32, kStreamBlocksPerSm)
    gemv_stream_kernel(const __grid_constant__ GemvParams p) {
  pdl_trigger();
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  uint8_t* mine = smem + warp * kStreamWarpBytes;
  float* sums = reinterpret_cast<float*>(smem + kSplitK * kStreamWarpBytes);  // [3][kTiles][32][4]
  // k in 32 bits (gemv_mma checks k < 2^31); every item's warp range has the same length.
  const int k = int(p.k);
  const int k_slice = k / p.splits;
  const int k_per_warp = k_slice / kSplitK;  // a multiple of 128: whole stages or one half stage
  const int stages = (k_per_warp + kStreamK - 1) / kStreamK;  // a warp's, per item
  const int items = int((p.n + kMmaRows - 1) / kMmaRows) * p.splits;
  // x's rows for this lane's B columns (null past m), read 8 values at 8 t of each group.
  const uint16_t* xrow[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int64_t xr = int64_t(j) * 8 + g;
    xrow[j] = xr < p.m ? p.x + xr * p.k + 8 * t : nullptr;
  }
  // The k range of this warp in item i.
  auto k_begin_of = [&](int i) { return (i % p.splits) * k_slice + warp * k_per_warp; };

  // Copies stage s of item i (k from its warp range's start + s * 256, to the range's end: a
  // half stage copies with lanes 0-15). Rows past the weight's end repeat its last row; their
  // sums are not stored.
  auto issue = [&](int i, int s, uint8_t* stage) {
    const int kb = k_begin_of(i) + s * kStreamK;
    if (8 * lane < k_begin_of(i) + k_per_warp - kb) {
      const int64_t n0 = int64_t(i / p.splits) * kMmaRows;
      const int last_row = int(min(int64_t(kMmaRows), p.n - n0)) - 1;
      const uint16_t* src = p.w + n0 * p.k + kb + 8 * lane;
#pragma unroll
      for (int r = 0; r < kMmaRows; ++r)
        cp_async16(smem_addr(stage + stage_offset(r, lane)), src + int64_t(min(r, last_row)) * p.k);
    }
    cp_async_commit();
  };
  float acc[kTiles][4];
  // The stage's groups in order: `full` (a constant at each call) drops the bound check.
  auto compute = [&](int kb, int k_end, const uint8_t* stage, bool full) {
#pragma unroll
    for (int u = 0; u < kStreamGroups; ++u) {
      if (!full && 32 * u >= k_end - kb) break;  // uniform across the warp
      const uint4 wa = *reinterpret_cast<const uint4*>(stage + stage_offset(g, 4 * u + t));
      const uint4 wb = *reinterpret_cast<const uint4*>(stage + stage_offset(g + 8, 4 * u + t));
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        uint4 xv = make_uint4(0, 0, 0, 0);
        if (xrow[j]) xv = __ldcg(reinterpret_cast<const uint4*>(xrow[j] + kb + 32 * u));
        mma_bf16(acc[j], wa.x, wb.x, wa.y, wb.y, xv.x, xv.y);
        mma_bf16(acc[j], wa.z, wb.z, wa.w, wb.w, xv.z, xv.w);
      }
    }
  };

  int i = blockIdx.x, s = 0, half = 0;
  if (i < items) issue(i, 0, mine);
  pdl_wait();  // the first stage of W is in flight; x is read after the kernel ahead is done
  while (i < items) {
    if (s == 0) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    }
    // The next stage: this item's, or the first of the block's next item.
    const bool item_done = s + 1 == stages;
    const int ni = item_done ? i + int(gridDim.x) : i, ns = item_done ? 0 : s + 1;
    if (ni < items) {
      issue(ni, ns, mine + (half ^ 1) * kStreamStageBytes);
    } else {
      cp_async_commit();  // an empty group: the wait below leaves only the newest in flight
    }
    cp_async_wait<1>();
    __syncwarp();  // the stage's bytes, copied by every lane, are visible to every lane
    const int kb = k_begin_of(i) + s * kStreamK, k_end = k_begin_of(i) + k_per_warp;
    const uint8_t* stage = mine + half * kStreamStageBytes;
    if (kb + kStreamK <= k_end) {
      compute(kb, k_end, stage, true);
    } else {
      compute(kb, k_end, stage, false);
    }
    __syncwarp();  // every lane has read this stage before the next issue refills it
    half ^= 1;
    if (!item_done) {
      ++s;
      continue;
    }
    // The item's end: the warps' sums added in warp order, into y or the slice's partial sums.
    add_warp_sums<kTiles>(sums, acc, p, int64_t(i / p.splits) * kMmaRows,
                          p.y + int64_t(i % p.splits) * p.m * p.n);
    __syncthreads();  // warp 0 has read the sums before the next item's are written
    i = ni;
    s = 0;
  }
  cp_async_wait<0>();
}

template <int kTiles>
void launch_gemv_mma(const GemvParams& p, GemvKernel kernel, cudaStream_t stream) {
  const int64_t tiles = (p.n + kMmaRows - 1) / kMmaRows;
  if (kernel == GemvKernel::kRegisters) {
    launch_dependent(gemv_mma_kernel<kTiles>, dim3(unsigned(tiles), unsigned(p.splits)),
                     kSplitK * 32, 0, stream, p);
  } else {
    // As many blocks as stay resident (the work per block does not change a bit of the result),
    // counted once per device, when the kernel's shared-memory limit is raised there.
    constexpr int kSmem = kStreamSmem<kTiles>;
    auto* kernel_fn = gemv_stream_kernel<kTiles>;
    static std::atomic<int> resident_on[kMaxDevices] = {};
    int device = 0;
    SPARKGLM_CUDA_CHECK(cudaGetDevice(&device));
    int resident = device < kMaxDevices ? resident_on[device].load() : 0;
    if (resident == 0) {
      SPARKGLM_CUDA_CHECK(
          cudaFuncSetAttribute(kernel_fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
      int sms = 0, per_sm = 0;
      SPARKGLM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      SPARKGLM_CUDA_CHECK(
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_fn, kSplitK * 32, kSmem));
      resident = std::max(1, sms * per_sm);
      if (device < kMaxDevices) resident_on[device].store(resident);
    }
    const int64_t items = tiles * p.splits;
    launch_dependent(kernel_fn, unsigned(std::min<int64_t>(items, resident)), kSplitK * 32, kSmem,
                     stream, p);
  }
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <int kMt>
int64_t gemv_blocks(int64_t n) {
  const int64_t rows_per_block = kWarps * kWarpRows<kMt>;
  return (n + rows_per_block - 1) / rows_per_block;
}

template <int kMt>
void launch_gemv(const GemvParams& p, cudaStream_t stream) {
  const dim3 grid(unsigned(gemv_blocks<kMt>(p.n)), unsigned((p.m + kMt - 1) / kMt));
  launch_dependent(gemv_kernel<kMt>, grid, kWarps * 32, 0, stream, p);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <int kMt>
void launch_gemv_group(GemvGroupParams g, int64_t m, cudaStream_t stream) {
  for (int i = 0; i < g.count; ++i)
    g.end[i] = (i > 0 ? g.end[i - 1] : 0) + gemv_blocks<kMt>(g.part[i].n);
  const dim3 grid(unsigned(g.end[g.count - 1]), unsigned((m + kMt - 1) / kMt));
  launch_dependent(gemv_group_kernel<kMt>, grid, kWarps * 32, 0, stream, g);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

// The CUDA-core kernel's tile width for m rows: it only groups rows for reuse of each W chunk.
template <typename F>
void with_tile_width(int64_t m, F&& f) {
  if (m == 1) {
    f(std::integral_constant<int, 1>{});
  } else if (m == 2) {
    f(std::integral_constant<int, 2>{});
  } else if (m <= 4) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}

}  // namespace

int gemv_mma_splits(int64_t n, int64_t k) {
  const int64_t blocks = (n + kMmaRows - 1) / kMmaRows;
  int splits = 1;
  while (blocks * splits < kGemvTargetBlocks && k % (kGemvMmaK * splits * 2) == 0) splits *= 2;
  return splits;
}

void gemv_mma(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
              const GemvSplit& split, GemvKernel kernel, cudaStream_t stream) {
  SPARKGLM_ASSERT(m >= 0 && m <= kGemvMaxRows && split.splits >= 1 &&
                      k % (kGemvMmaK * split.splits) == 0 && k <= int64_t(INT32_MAX) &&
                      (split.splits == 1 || split.partials),
                  "gemv_mma: needs m <= 32, k a multiple of 512 x splits, room for the partials");
  if (m == 0 || n <= 0) return;
  GemvParams p{x, w, y, m, n, k, split.splits};
  if (kernel == GemvKernel::kAuto)
    kernel = n * k * 2 >= kGemvStreamBytes ? GemvKernel::kStream : GemvKernel::kRegisters;
  if (split.splits > 1) p.y = split.partials;
  // The tile count only pads B; every column's MMA sequence is the same.
  if (m <= 8) {
    launch_gemv_mma<1>(p, kernel, stream);
  } else if (m <= 16) {
    launch_gemv_mma<2>(p, kernel, stream);
  } else if (m <= 24) {
    launch_gemv_mma<3>(p, kernel, stream);
  } else {
    launch_gemv_mma<4>(p, kernel, stream);
  }
  if (split.splits > 1) sum_split_partials(split.partials, split.splits, m * n, 1.0f, y, stream);
}

void gemv_cuda_cores(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                     float* y, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  const GemvParams p{x, w, y, m, n, k};
  with_tile_width(m, [&](auto t) { launch_gemv<decltype(t)::value>(p, stream); });
}

void gemv_cuda_cores_group(const GemvPart* parts, int count, int64_t m, cudaStream_t stream) {
  SPARKGLM_ASSERT(count >= 0 && count <= kGemvGroupMax, "gemv_cuda_cores_group: at most 4 parts");
  GemvGroupParams g{};
  for (int i = 0; i < count; ++i) {
    const GemvPart& q = parts[i];
    SPARKGLM_ASSERT(q.k % 8 == 0 && q.n > 0 && reinterpret_cast<uintptr_t>(q.x) % 16 == 0 &&
                        reinterpret_cast<uintptr_t>(q.w) % 16 == 0,
                    "gemv_cuda_cores_group: k a multiple of 8, n > 0, operands 16-byte aligned");
    g.part[i] = GemvParams{q.x, q.w, q.y, m, q.n, q.k};  // launch_gemv_group lays out g.end
  }
  g.count = count;
  if (m <= 0 || count == 0) return;
  with_tile_width(m, [&](auto t) { launch_gemv_group<decltype(t)::value>(g, m, stream); });
}

void gemv_bf16(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
               cudaStream_t stream, GemvKernel kernel) {
  SPARKGLM_ASSERT(k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(w) % 16 == 0,
                  "gemv_bf16: k must be a multiple of 8 and operands 16-byte aligned");
  if (gemv_on_tensor_cores(m, k)) {
    gemv_mma(x, m, w, n, k, y, GemvSplit{}, kernel, stream);
  } else {
    gemv_cuda_cores(x, m, w, n, k, y, stream);
  }
}

void sum_split_partials(const float* partial, int splits, int64_t count, float scale, float* y,
                        cudaStream_t stream) {
  if (count <= 0) return;
  launch_dependent(sum_splits_kernel, unsigned(std::min<int64_t>((count + 255) / 256, 4096)), 256,
                   0, stream, partial, splits, count, scale, y);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
