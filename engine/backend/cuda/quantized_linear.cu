#include "engine/backend/cuda/quantized_linear.h"

#include <string>

#include "engine/backend/cuda/bf16_pairs.cuh"
#include "engine/backend/cuda/cp_async.cuh"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/backend/cuda/quantized_gemv_device.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

using namespace qgemv;

// Warps per block, each a contiguous range of k: 8, so that two blocks (up to 128 registers a
// thread) share an SM and one's loads are in flight while the other finishes.
constexpr int kMaxSplit = 8;
// A grid of more warps than this (tiles x splits) runs 4 warps a block: long k ranges a warp.
constexpr int64_t kTargetWarps = 8192;
// A weight of fewer 16-row tiles than this (half the H200's 132 SMs) leaves SMs idle with one
// block a tile: its k is split over blocks too, up to about two blocks an SM.
constexpr int64_t kSplitBelowTiles = 66;
constexpr int64_t kSplitTargetBlocks = 264;
constexpr int kMaxBlockSplits = 16;

struct GemvArgs {
  const uint16_t* x;  // [m, cols] BF16
  int64_t m;
  QuantizedWeight w;
  float* y;          // [m, rows]; with block_splits > 1 the partials [block_splits][m][rows]
  int splits;        // warps a block, each a contiguous part of the block's k
  int block_splits;  // blocks a 16-row tile (blockIdx.y), each a contiguous part of k
};

// x row xr's 8 values at the lane's columns of group gi (zeros past m or cols) as B fragments.
template <QuantFormat F>
__device__ __forceinline__ void b_fragments(const GemvArgs& p, int64_t xr, int64_t gi, int t,
                                            uint32_t (&b)[2][2]) {
  const int64_t c = gi * kGroup + 8 * t;
  uint4 xv = make_uint4(0, 0, 0, 0);
  if (xr < p.m && c < p.w.cols)
    xv = __ldcg(reinterpret_cast<const uint4*>(p.x + xr * p.w.cols + c));
  pack_b<F>(xv, b);
}

// Shared memory a warp needs: kStream's two stages (whose first bytes take the warp's sums at the
// end), or the baseline's room for its sums alone.
template <QuantFormat F, int kTiles, bool kStream>
constexpr int kWarpBytes = kStream ? 2 * Stage<F>::kBytes : kTiles * 128 * 4;

// Grid: ceil(rows / 16) x B blocks of S warps. Block (b, y) takes W rows 16b .. 16b + 15 (the
// MMA's A rows; lane (g, t) reads rows g and g + 8) against x rows 0 .. 8 kTiles - 1 (B columns,
// zeros past m) over the units [y U / B, (y + 1) U / B) of k (units of kUnit groups); its warp w
// takes the w-th of S contiguous parts of them, in increasing order. Warp 0 adds the warps' sums
// in warp order and writes y (B = 1) or the block's partial sum (B > 1: sum_split_partials adds
// them in block order).
// kStream: each warp's loads go through its own two shared-memory stages (issue_stage: the next
// stage in flight while the current one is computed) and NVFP4 decodes through the E2M1 pair
// table (32 KB of shared memory); at 1-8 rows 3 blocks share an SM. Else the 2026-12-02 baseline
// (QuantKernel): 8-byte fragment loads from global memory, NVFP4 decoded per element in FP32,
// 2 blocks an SM. The same values reach the same MMAs in the same order: the same bits.
template <QuantFormat F, int kTiles, bool kStream>
__global__ void __launch_bounds__(kMaxSplit * 32, kStream&& kTiles == 1 ? 3 : 2)
    quantized_gemv_kernel(const __grid_constant__ GemvArgs p) {
  pdl_trigger();
  if constexpr (!kStream) pdl_wait();
  extern __shared__ __align__(16) uint8_t smem[];  // [S][kWarpBytes]
  constexpr bool kUseTable = kStream && F == QuantFormat::kNvfp4;
  __shared__ __align__(16) uint32_t table[kUseTable ? kE2m1TableWords : 4];
  if constexpr (kUseTable) {
    fill_e2m1_table(table);
    __syncthreads();
  }
  constexpr int kUnit = F == QuantFormat::kFp8Block ? 4 : 1;  // groups a scale unit
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const QuantizedWeight& w = p.w;
  const int64_t o0 = int64_t(blockIdx.x) * kTileRows;
  // Rows past the weight's end repeat its last row; their sums are not stored.
  const int64_t r0 = min(o0 + g, w.rows - 1), r1 = min(o0 + g + 8, w.rows - 1);
  // k in 32-bit: cols < 2^31, and the products below stay under 2^31 (units <= 2^26, warp < 8,
  // blockIdx.y < 16): 32-bit divisions cost a fraction of 64-bit ones, once a warp.
  const int groups = int((w.cols + kGroup - 1) / kGroup);
  const int units = (groups + kUnit - 1) / kUnit;
  const int by = int(blockIdx.y);
  const int u_begin = by * units / p.block_splits;
  const int u_count = (by + 1) * units / p.block_splits - u_begin;
  const int g_begin = (u_begin + warp * u_count / p.splits) * kUnit;
  const int g_end = min((u_begin + (warp + 1) * u_count / p.splits) * kUnit, groups);
  const float* unit_row = F == QuantFormat::kFp8Block
                              ? w.scale_inv + (o0 / 128) * ((w.cols + 127) / 128)
                              : nullptr;  // FP8 block: this tile's row of scale_inv
  constexpr int kMine = kWarpBytes<F, kTiles, kStream>;
  uint8_t* mine = smem + warp * kMine;

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float part[kTiles][4];  // the current scale unit's sums (8-bit formats)
  // The FP8-block scales of a stage's units (full: every group of the stage is in range).
  auto unit_scales = [&](int gb, float(&us)[kStage / kUnit], bool full) {
    if constexpr (F == QuantFormat::kFp8Block) {
#pragma unroll
      for (int u = 0; u < kStage / kUnit; ++u) {
        const int gi = gb + u * kUnit;
        us[u] = full || gi < g_end ? __ldg(unit_row + gi / kUnit) : 0.0f;
      }
    }
  };

  if constexpr (kStream) {
    // The stage being computed and the next one: its bytes in `mine` (two halves), its scales in
    // registers, both requested a stage ahead. A stage whose 8 groups all lie in the warp's range
    // and inside cols (every stage of a production shape) runs without per-group guards.
    StageScales<F> cur, next;
    float unit_cur[kStage / kUnit] = {}, unit_next[kStage / kUnit] = {};
    const bool whole_groups = w.cols % kGroup == 0;
    const bool words8 =
        (w.cols / 32) % 8 == 0 && g_begin % 8 == 0 && reinterpret_cast<uintptr_t>(w.scale) % 8 == 0;
    // x's rows for this lane's B columns (null past m), read 8 columns at 8 t of each group.
    const uint16_t* xrow[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const int64_t xr = int64_t(j) * 8 + g;
      xrow[j] = xr < p.m ? p.x + xr * w.cols + 8 * t : nullptr;
    }
    auto fetch = [&](int gb, uint8_t* stage, StageScales<F>& sc, float(&us)[kStage / kUnit],
                     bool full) {
      issue_stage<F>(w, o0, gb, g_end, stage, lane);
      load_stage_scales<F>(w, r0, r1, gb, g_end, t, full, words8, sc);
      unit_scales(gb, us, full);
    };
    // `full` is a constant at each call: inlined, each call compiles to its own guard-free or
    // guarded body.
    auto compute = [&](int gb, const uint8_t* stage, bool full) {
#pragma unroll
      for (int u = 0; u < kStage; ++u) {
        const int gi = gb + u;
        if (!full && gi >= g_end) break;  // uniform across the warp
        RawGroup<F> raw;
        group_scales<F>(cur, u, raw);
        const int c = gi * kGroup;  // + 8 t, in xrow
        const bool c_in = full || c + 8 * t < w.cols;
        read_group<F>(stage, u, c_in, g, t, raw);
        auto load_b = [&](int j, uint32_t(&b)[2][2]) {
          uint4 xv = make_uint4(0, 0, 0, 0);
          if (xrow[j] && c_in) xv = __ldcg(reinterpret_cast<const uint4*>(xrow[j] + c));
          pack_b<F>(xv, b);
        };
        const bool unit_last = u % kUnit == kUnit - 1 || (!full && gi == g_end - 1);
        mma_group<F, kTiles, kUseTable>(raw, load_b, table + lane, u, unit_last,
                                        unit_cur[u / kUnit], acc, part);
      }
    };
    int half = 0;
    if (g_begin < g_end) {
      if (whole_groups && g_begin + kStage <= g_end) {
        fetch(g_begin, mine, cur, unit_cur, true);
      } else {
        fetch(g_begin, mine, cur, unit_cur, false);
      }
    }
    pdl_wait();  // the first stage of W and its scales are in flight; x is read after the wait
    for (int gb = g_begin; gb < g_end; gb += kStage, half ^= 1) {
      const int nb = gb + kStage;
      if (nb < g_end) {
        uint8_t* other = mine + (half ^ 1) * Stage<F>::kBytes;
        if (whole_groups && nb + kStage <= g_end) {
          fetch(nb, other, next, unit_next, true);
        } else {
          fetch(nb, other, next, unit_next, false);
        }
      } else {
        cp_async_commit();  // an empty group: the wait below leaves only the newest in flight
      }
      cp_async_wait<1>();
      __syncwarp();  // the stage's bytes, copied by every lane, are visible to every lane
      const uint8_t* stage = mine + half * Stage<F>::kBytes;
      if (whole_groups && nb <= g_end) {
        compute(gb, stage, true);
      } else {
        compute(gb, stage, false);
      }
      __syncwarp();  // every lane has read this stage before the next fetch refills it
      cur = next;
#pragma unroll
      for (int u = 0; u < kStage / kUnit; ++u) unit_cur[u] = unit_next[u];
    }
    cp_async_wait<0>();
    __syncwarp();
  } else {
    for (int64_t gb = g_begin; gb < g_end; gb += kStage) {
      // Every load of the stage is issued before any is used: a decode GEMV is a weight stream,
      // and only bytes in flight hide the memory latency.
      RawGroup<F> raw[kStage];
      float unit_scale[kStage / kUnit];
#pragma unroll
      for (int u = 0; u < kStage; ++u) {
        if (gb + u < g_end) raw[u] = load_group<F>(w, r0, r1, gb + u, t);
      }
      if constexpr (F == QuantFormat::kFp8Block) {
#pragma unroll
        for (int u = 0; u < kStage / kUnit; ++u) {
          const int64_t gi = gb + u * kUnit;
          unit_scale[u] =
              gi < g_end ? __ldg(w.scale_inv + (o0 / 128) * ((w.cols + 127) / 128) + gi / kUnit)
                         : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < kStage; ++u) {
        const int64_t gi = gb + u;
        if (gi >= g_end) break;  // uniform across the warp
        auto load_b = [&](int j, uint32_t(&b)[2][2]) {
          b_fragments<F>(p, int64_t(j) * 8 + g, gi, t, b);
        };
        const bool unit_last = u % kUnit == kUnit - 1 || gi == g_end - 1;
        mma_group<F, kTiles, kUseTable>(raw[u], load_b, table + lane, u, unit_last,
                                        unit_scale[u / kUnit], acc, part);
      }
    }
  }

  if (warp > 0) {
    float* sums = reinterpret_cast<float*>(mine);
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) sums[j * 128 + lane * 4 + e] = acc[j][e];
  }
  __syncthreads();
  if (warp != 0) return;
  const bool block_part = p.block_splits > 1;
  float* out = block_part ? p.y + int64_t(blockIdx.y) * p.m * w.rows : p.y;
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = acc[j][e];
      for (int s = 1; s < p.splits; ++s)
        v = __fadd_rn(v, reinterpret_cast<const float*>(smem + s * kMine)[j * 128 + lane * 4 + e]);
      if constexpr (F == QuantFormat::kNvfp4) {
        if (!block_part) v = __fmul_rn(v, w.global_scale);  // else sum_split_partials does
      }
      const int64_t o = o0 + g + (e >= 2 ? 8 : 0);
      const int64_t xr = int64_t(j) * 8 + 2 * t + (e & 1);
      if (o < w.rows && xr < p.m) out[xr * w.rows + o] = v;
    }
}

struct GemvPlan {
  int splits = 1;        // warps a block
  int block_splits = 1;  // blocks a tile
};

// From the weight's shape and the lent room alone, never from m (the room is judged at 32 rows).
GemvPlan plan_for(const QuantizedWeight& w, const GemvPartials& partials) {
  const int64_t tiles = (w.rows + kTileRows - 1) / kTileRows;
  const int64_t unit_cols = w.format == QuantFormat::kFp8Block ? 128 : kGroup;
  const int64_t units = (w.cols + unit_cols - 1) / unit_cols;
  GemvPlan plan;
  plan.splits = kMaxSplit;
  while (plan.splits > 4 && tiles * plan.splits > kTargetWarps) plan.splits /= 2;
  while (plan.splits > 1 && plan.splits > units) plan.splits /= 2;
  if (tiles >= kSplitBelowTiles || !partials.data) return plan;
  // Few tiles: blocks of up to 4 warps over parts of k, doubling while the grid stays within
  // about two blocks an SM, every warp keeps at least 2 units, and the partial sums fit.
  const int splits = plan.splits < 4 ? plan.splits : 4;
  int blocks = 1;
  while (blocks < kMaxBlockSplits && tiles * blocks * 2 <= kSplitTargetBlocks &&
         units >= int64_t(splits) * blocks * 2 * 2 &&
         size_t(blocks) * 2 * kQuantGemvMaxRows * size_t(w.rows) <= partials.floats)
    blocks *= 2;
  if (blocks > 1) plan = {splits, blocks};
  return plan;
}

template <QuantFormat F, int kTiles, bool kStream>
void launch(const GemvArgs& a, cudaStream_t stream) {
  const unsigned tiles = unsigned((a.w.rows + kTileRows - 1) / kTileRows);
  const size_t smem = size_t(a.splits) * kWarpBytes<F, kTiles, kStream>;
  auto* kernel = quantized_gemv_kernel<F, kTiles, kStream>;
  SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(kMaxSplit * kWarpBytes<F, kTiles, kStream>)));
  launch_dependent(kernel, dim3(tiles, unsigned(a.block_splits)), unsigned(a.splits) * 32, smem,
                   stream, a);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <QuantFormat F, bool kStream>
void launch_rows(const GemvArgs& a, cudaStream_t stream) {
  // The tile count only pads B with zero columns; every column's MMA sequence is the same.
  if (a.m <= 8) {
    launch<F, 1, kStream>(a, stream);
  } else if (a.m <= 16) {
    launch<F, 2, kStream>(a, stream);
  } else if constexpr (!kStream) {  // the stream path takes at most 16 rows (quantized_gemv)
    if (a.m <= 24) {
      launch<F, 3, false>(a, stream);
    } else {
      launch<F, 4, false>(a, stream);
    }
  }
}

bool aligned(const void* p, uintptr_t to) {
  return reinterpret_cast<uintptr_t>(p) % to == 0;
}

}  // namespace

const char* quant_format_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::kNvfp4:
      return "NVFP4";
    case QuantFormat::kMxfp8:
      return "MXFP8";
    case QuantFormat::kFp8Block:
      return "FP8 block";
  }
  return "unknown";
}

double QuantizedWeight::bytes() const {
  const double values = double(rows) * double(cols);
  switch (format) {
    case QuantFormat::kNvfp4:
      return values / 2 + values / 16 + 4;
    case QuantFormat::kMxfp8:
      return values + values / 32;
    case QuantFormat::kFp8Block:
      return values + 4.0 * double((rows + 127) / 128) * double((cols + 127) / 128);
  }
  return 0;
}

const char* quantized_weight_problem(const QuantizedWeight& w) {
  if (w.rows <= 0 || w.cols <= 0) return "rows and cols must be positive";
  if (w.cols % 16 != 0) return "cols must be a multiple of 16";
  if (!w.data) return "no data";
  switch (w.format) {
    case QuantFormat::kNvfp4:
      if (!w.scale) return "NVFP4 needs its E4M3 block scales";
      if (!aligned(w.data, 8)) return "NVFP4 data must be 8-byte aligned";
      return "";
    case QuantFormat::kMxfp8:
      if (w.cols % 32 != 0) return "MXFP8 needs cols a multiple of 32";
      if (!w.scale) return "MXFP8 needs its E8M0 scales";
      if (!aligned(w.data, 16)) return "MXFP8 data must be 16-byte aligned";
      return "";
    case QuantFormat::kFp8Block:
      if (!w.scale_inv) return "FP8 block needs its scale_inv";
      if (!aligned(w.data, 16)) return "FP8 block data must be 16-byte aligned";
      return "";
  }
  return "unknown format";
}

void quantized_gemv(const uint16_t* x, int64_t m, const QuantizedWeight& w, float* y,
                    cudaStream_t stream, QuantKernel kernel, const GemvPartials& partials) {
  const std::string problem = quantized_weight_problem(w);
  if (!problem.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string("quantized_gemv: ") + quant_format_name(w.format) + " weight [" +
                    std::to_string(w.rows) + ", " + std::to_string(w.cols) + "]: " + problem);
  }
  if (m < 0 || m > kQuantGemvMaxRows || (m > 0 && (!x || !aligned(x, 16) || !y))) {
    throw Error(ErrorKind::kInvalidArgument,
                "quantized_gemv: needs 0 <= m <= 32 decode rows (got " + std::to_string(m) +
                    "), x 16-byte aligned and y");
  }
  if (m == 0) return;
  const GemvPlan plan = plan_for(w, partials);
  const bool block_part = plan.block_splits > 1;
  const GemvArgs a{x, m, w, block_part ? partials.data : y, plan.splits, plan.block_splits};
  // The stream path copies 16-byte pieces of each row: rows of a multiple of 16 bytes, aligned.
  // Past 16 rows (3-4 x tiles) the baseline's loads run: streamed, those kernels spill (MXFP8 ran
  // 0.56-0.79x the baseline at 32 rows, bundle 2026-12-04-g1-quant-stream-h200). Either path
  // gives the same bits, so the choice by m changes no row's result.
  const bool stream_rows = kernel == QuantKernel::kCurrent && w.data_row_bytes() % 16 == 0 &&
                           aligned(w.data, 16) && m <= 16;
  switch (w.format) {
    case QuantFormat::kNvfp4:
      stream_rows ? launch_rows<QuantFormat::kNvfp4, true>(a, stream)
                  : launch_rows<QuantFormat::kNvfp4, false>(a, stream);
      break;
    case QuantFormat::kMxfp8:
      stream_rows ? launch_rows<QuantFormat::kMxfp8, true>(a, stream)
                  : launch_rows<QuantFormat::kMxfp8, false>(a, stream);
      break;
    case QuantFormat::kFp8Block:
      stream_rows ? launch_rows<QuantFormat::kFp8Block, true>(a, stream)
                  : launch_rows<QuantFormat::kFp8Block, false>(a, stream);
      break;
  }
  if (block_part) {
    sum_split_partials(partials.data, plan.block_splits, m * w.rows,
                       w.format == QuantFormat::kNvfp4 ? w.global_scale : 1.0f, y, stream);
  }
}

}  // namespace sparkglm::cuda
