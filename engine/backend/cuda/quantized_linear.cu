#include "engine/backend/cuda/quantized_linear.h"

#include <string>

#include "engine/backend/cuda/bf16_pairs.cuh"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/scale_codes.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kTileRows = 16;  // W rows per block: the A operand of mma.m16n8k16
constexpr int kGroup = 32;     // k per group: two MMAs, one MXFP8 scale
// Warps per block, each a contiguous range of k: 8, so that two blocks (up to 128 registers a
// thread) share an SM and one's loads are in flight while the other finishes.
constexpr int kMaxSplit = 8;
// A grid of more warps than this (tiles x splits) runs 4 warps a block: long k ranges a warp.
constexpr int64_t kTargetWarps = 8192;

struct GemvArgs {
  const uint16_t* x;  // [m, cols] BF16
  int64_t m;
  QuantizedWeight w;
  float* y;  // [m, rows]
  int splits;
};

// 8 bytes of the weight stream, not kept in L1 (each byte is read once).
__device__ __forceinline__ uint2 load_stream8(const void* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// BF16 pair (low half = f0) of two FP32 values that BF16 holds exactly (the top 16 bits).
__device__ __forceinline__ uint32_t pack_exact_bf16(float f0, float f1) {
  return __byte_perm(__float_as_uint(f0), __float_as_uint(f1), 0x7632);
}

// One lane's share of one group (32 k) of its two W rows g and g + 8: k 8t .. 8t + 7 of each.
template <QuantFormat F>
struct RawGroup {
  uint2 v[2];       // 8-bit formats: 8 E4M3 a row
  float s[2] = {};  // MXFP8: the rows' scales 2^(e - 127)
};
template <>
struct RawGroup<QuantFormat::kNvfp4> {
  uint32_t v[2];  // 8 E2M1 a row (low nibble = the lower column)
  uint32_t s[2];  // the rows' E4M3 block scale codes
};

// Group `gi` of rows r0 (= g) and r1 (= g + 8); lanes whose 8 columns lie past cols read zeros.
template <QuantFormat F>
__device__ __forceinline__ RawGroup<F> load_group(const QuantizedWeight& w, int64_t r0, int64_t r1,
                                                  int64_t gi, int t) {
  RawGroup<F> r;
  const int64_t c = gi * kGroup + 8 * t;  // the lane's first column
  const bool in = c < w.cols;             // cols is a multiple of 16: all 8 or none
  const int64_t rows[2] = {r0, r1};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if constexpr (F == QuantFormat::kNvfp4) {
      r.v[h] =
          in ? __ldg(reinterpret_cast<const unsigned int*>(w.data + rows[h] * (w.cols / 2) + c / 2))
             : 0u;
      r.s[h] = in ? __ldg(w.scale + rows[h] * (w.cols / 16) + c / 16) : 0u;
    } else {
      r.v[h] = in ? load_stream8(w.data + rows[h] * w.cols + c) : make_uint2(0, 0);
      if constexpr (F == QuantFormat::kMxfp8)
        r.s[h] = e8m0_to_f32_dev(__ldg(w.scale + rows[h] * (w.cols / 32) + gi));
    }
  }
  return r;
}

// The group's A fragments for its two MMAs: a[q][0..3] for the MMA over the lane's columns
// 8t + 4q .. 8t + 4q + 3 (quantized_linear.h gives the slot order). NVFP4 with kTable (the
// current kernel): each byte's E2M1 pair from the table (`lut`: this lane's column of it) times
// the block scale as BF16 in one BF16x2 FMA, exact (e2m1 x e4m3 has at most 6 significant bits,
// 2^-10 .. 2688), so the same bits as the baseline's FP32 decode of each element (!kTable).
template <QuantFormat F, bool kTable>
__device__ __forceinline__ void a_fragments(const RawGroup<F>& r, const uint32_t* lut,
                                            uint32_t (&a)[2][4]) {
  if constexpr (F == QuantFormat::kNvfp4 && kTable) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t s = bf16x2_splat_exact(e4m3_to_f32(uint8_t(r.s[h])));
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        a[q][h] = bf16x2_mul_exact(e2m1_pair(lut, r.v[h], 2 * q), s);          // slots 2t, 2t + 1
        a[q][h + 2] = bf16x2_mul_exact(e2m1_pair(lut, r.v[h], 2 * q + 1), s);  // 2t + 8, 2t + 9
      }
    }
  } else if constexpr (F == QuantFormat::kNvfp4) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float s = e4m3_to_f32(uint8_t(r.s[h]));
      float f[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) f[e] = __fmul_rn(e2m1_to_f32_dev(r.v[h] >> (4 * e)), s);
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        a[q][h] = pack_exact_bf16(f[4 * q], f[4 * q + 1]);          // slots 2t, 2t + 1
        a[q][h + 2] = pack_exact_bf16(f[4 * q + 2], f[4 * q + 3]);  // slots 2t + 8, 2t + 9
      }
    }
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t u[2] = {r.v[h].x, r.v[h].y};
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        a[q][h] = e4m3_pair02(u[q]);      // columns 4q, 4q + 2 at slots 2t, 2t + 1
        a[q][h + 2] = e4m3_pair13(u[q]);  // columns 4q + 1, 4q + 3 at slots 2t + 8, 2t + 9
      }
    }
  }
}

// The B fragments of x row `xr` (or zeros past m or cols) for the group's two MMAs, in the same
// column order as a_fragments.
template <QuantFormat F>
__device__ __forceinline__ void b_fragments(const GemvArgs& p, int64_t xr, int64_t gi, int t,
                                            uint32_t (&b)[2][2]) {
  const int64_t c = gi * kGroup + 8 * t;
  uint4 xv = make_uint4(0, 0, 0, 0);
  if (xr < p.m && c < p.w.cols) xv = __ldg(reinterpret_cast<const uint4*>(p.x + xr * p.w.cols + c));
  if constexpr (F == QuantFormat::kNvfp4) {
    b[0][0] = xv.x;
    b[0][1] = xv.y;
    b[1][0] = xv.z;
    b[1][1] = xv.w;
  } else {
    b[0][0] = __byte_perm(xv.x, xv.y, 0x5410);  // columns 0, 2
    b[0][1] = __byte_perm(xv.x, xv.y, 0x7632);  // columns 1, 3
    b[1][0] = __byte_perm(xv.z, xv.w, 0x5410);
    b[1][1] = __byte_perm(xv.z, xv.w, 0x7632);
  }
}

// Grid: ceil(rows / 16) blocks of `splits` warps. Block b takes W rows 16b .. 16b + 15 (the MMA's
// A rows; lane (g, t) loads rows g and g + 8) against x rows 0 .. 8 kTiles - 1 (B columns, zeros
// past m). Warp w takes the groups of k [w U / S, (w + 1) U / S) in units U of kUnit groups, in
// increasing order; the warps' sums are added in warp order by warp 0.
// kCurrent: the current kernel, else the 2026-12-02 baseline (QuantKernel). The current one takes
// NVFP4 through the E2M1 pair table (32 KB of shared memory) where the baseline decodes each
// element in FP32, and at 1-8 rows runs NVFP4 and FP8 block at 3 blocks an SM (80 registers,
// no spills; MXFP8 would spill) where the baseline runs 2. Same code otherwise, same bits.
template <QuantFormat F>
constexpr bool kThreeBlocks = F != QuantFormat::kMxfp8;
template <QuantFormat F, int kTiles, bool kCurrent>
__global__ void __launch_bounds__(kMaxSplit * 32, kCurrent&& kTiles == 1 && kThreeBlocks<F> ? 3 : 2)
    quantized_gemv_kernel(const __grid_constant__ GemvArgs p) {
  extern __shared__ float partial[];  // [splits - 1][kTiles][32][4]
  constexpr bool kUseTable = kCurrent && F == QuantFormat::kNvfp4;
  __shared__ __align__(16) uint32_t table[kUseTable ? kE2m1TableWords : 4];
  if constexpr (kUseTable) {
    fill_e2m1_table(table);
    __syncthreads();
  }
  // Groups per scale unit (a warp's range is whole units) and groups loaded ahead of their use.
  constexpr int kUnit = F == QuantFormat::kFp8Block ? 4 : 1;
  constexpr int kStage = 8;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const QuantizedWeight& w = p.w;
  const int64_t o0 = int64_t(blockIdx.x) * kTileRows;
  // Rows past the weight's end repeat its last row; their sums are not stored.
  const int64_t r0 = min(o0 + g, w.rows - 1), r1 = min(o0 + g + 8, w.rows - 1);
  const int64_t groups = (w.cols + kGroup - 1) / kGroup;
  const int64_t units = (groups + kUnit - 1) / kUnit;
  const int64_t g_begin = warp * units / p.splits * kUnit;
  const int64_t g_end = min((warp + 1) * units / p.splits * kUnit, groups);
  const int64_t scale_cols = (w.cols + 127) / 128;  // FP8 block: scale_inv's row length

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float part[kTiles][4];  // the current scale unit's sums (8-bit formats)

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
            gi < g_end ? __ldg(w.scale_inv + (o0 / 128) * scale_cols + gi / kUnit) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kStage; ++u) {
      const int64_t gi = gb + u;
      if (gi >= g_end) break;  // uniform across the warp
      uint32_t a[2][4];
      a_fragments<F, kUseTable>(raw[u], table + lane, a);
      if constexpr (F != QuantFormat::kNvfp4) {
        if (u % kUnit == 0) {
#pragma unroll
          for (int j = 0; j < kTiles; ++j) part[j][0] = part[j][1] = part[j][2] = part[j][3] = 0.0f;
        }
      }
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        uint32_t b[2][2];
        b_fragments<F>(p, int64_t(j) * 8 + g, gi, t, b);
        float* c = F == QuantFormat::kNvfp4 ? acc[j] : part[j];
#pragma unroll
        for (int q = 0; q < 2; ++q)
          mma_bf16(c, a[q][0], a[q][1], a[q][2], a[q][3], b[q][0], b[q][1]);
      }
      if constexpr (F == QuantFormat::kMxfp8) {
        // Each group's sums times its rows' scales: c0, c1 belong to row g, c2, c3 to row g + 8.
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            acc[j][e] = __fmaf_rn(part[j][e], raw[u].s[e >> 1], acc[j][e]);
      } else if constexpr (F == QuantFormat::kFp8Block) {
        if (u % kUnit == kUnit - 1 || gi == g_end - 1) {  // the unit's last group
#pragma unroll
          for (int j = 0; j < kTiles; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[j][e] = __fmaf_rn(part[j][e], unit_scale[u / kUnit], acc[j][e]);
        }
      }
    }
  }

  if (warp > 0) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        partial[((warp - 1) * kTiles + j) * 128 + lane * 4 + e] = acc[j][e];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = acc[j][e];
      for (int s = 1; s < p.splits; ++s)
        v = __fadd_rn(v, partial[((s - 1) * kTiles + j) * 128 + lane * 4 + e]);
      if constexpr (F == QuantFormat::kNvfp4) v = __fmul_rn(v, w.global_scale);
      const int64_t o = o0 + g + (e >= 2 ? 8 : 0);
      const int64_t xr = int64_t(j) * 8 + 2 * t + (e & 1);
      if (o < w.rows && xr < p.m) p.y[xr * w.rows + o] = v;
    }
}

// Warps per block (k split): from the weight's shape alone, never from m.
int split_for(const QuantizedWeight& w) {
  const int64_t tiles = (w.rows + kTileRows - 1) / kTileRows;
  const int64_t unit_cols = w.format == QuantFormat::kFp8Block ? 128 : kGroup;
  const int64_t units = (w.cols + unit_cols - 1) / unit_cols;
  int splits = kMaxSplit;
  while (splits > 4 && tiles * splits > kTargetWarps) splits /= 2;
  while (splits > 1 && splits > units) splits /= 2;
  return splits;
}

template <QuantFormat F, int kTiles, bool kCurrent>
void launch(const GemvArgs& a, cudaStream_t stream) {
  const unsigned blocks = unsigned((a.w.rows + kTileRows - 1) / kTileRows);
  const size_t smem = size_t(a.splits - 1) * kTiles * 128 * sizeof(float);
  quantized_gemv_kernel<F, kTiles, kCurrent><<<blocks, unsigned(a.splits) * 32, smem, stream>>>(a);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <QuantFormat F, bool kCurrent>
void launch_rows(const GemvArgs& a, cudaStream_t stream) {
  // The tile count only pads B with zero columns; every column's MMA sequence is the same.
  if (a.m <= 8) {
    launch<F, 1, kCurrent>(a, stream);
  } else if (a.m <= 16) {
    launch<F, 2, kCurrent>(a, stream);
  } else if (a.m <= 24) {
    launch<F, 3, kCurrent>(a, stream);
  } else {
    launch<F, 4, kCurrent>(a, stream);
  }
}

template <QuantFormat F>
void launch_kernel(const GemvArgs& a, QuantKernel kernel, cudaStream_t stream) {
  if (kernel == QuantKernel::kBaseline) {
    launch_rows<F, false>(a, stream);
  } else {
    launch_rows<F, true>(a, stream);
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
                    cudaStream_t stream, QuantKernel kernel) {
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
  const GemvArgs a{x, m, w, y, split_for(w)};
  switch (w.format) {
    case QuantFormat::kNvfp4:
      launch_kernel<QuantFormat::kNvfp4>(a, kernel, stream);
      break;
    case QuantFormat::kMxfp8:  // the same kernel in both generations
      launch_rows<QuantFormat::kMxfp8, false>(a, stream);
      break;
    case QuantFormat::kFp8Block:
      launch_kernel<QuantFormat::kFp8Block>(a, kernel, stream);
      break;
  }
}

}  // namespace sparkglm::cuda
