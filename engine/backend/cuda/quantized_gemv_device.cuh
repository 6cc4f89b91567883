#pragma once
// The device pieces of quantized_gemv (quantized_linear.cu; the numerical contract and the
// roofline are in quantized_linear.h): a lane's share of one 32-column group of its two weight
// rows (RawGroup) loaded from global memory or read from a warp's shared-memory stage, the stage's
// copies and scales, the exact A fragments, the B fragments, and one group's MMAs and scale FMAs.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/bf16_pairs.cuh"
#include "engine/backend/cuda/cp_async.cuh"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/quantized_linear.h"
#include "engine/backend/cuda/scale_codes.cuh"

namespace sparkglm::cuda::qgemv {

constexpr int kTileRows = 16;  // W rows per block: the A operand of mma.m16n8k16
constexpr int kGroup = 32;     // k per group: two MMAs, one MXFP8 scale
constexpr int kStage = 8;      // groups a warp loads ahead of their use

// One warp's shared-memory stage: its 16 rows' bytes of kStage groups, each row padded so that
// the fragment reads of a warp hit 32 different banks (8-bit: lanes read 8 bytes at row g * 288
// + 8 t, i.e. banks 8 g + 2 t + {0, 1} mod 32 within a half warp; NVFP4: 4 bytes at g * 144 +
// 4 t, banks 4 g + t).
template <QuantFormat F>
struct Stage {
  static constexpr int kGroupBytes = F == QuantFormat::kNvfp4 ? 16 : 32;  // a row's, a group
  static constexpr int kRowBytes = kStage * kGroupBytes;
  static constexpr int kRowStride = kRowBytes + (F == QuantFormat::kNvfp4 ? 16 : 32);
  static constexpr int kBytes = kTileRows * kRowStride;
  static constexpr int kChunksPerRow = kRowBytes / 16;
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

// The scales of group `gi` of rows r0 (= g) and r1 (= g + 8) into r.s (none for FP8 block).
template <QuantFormat F>
__device__ __forceinline__ void load_scales(const QuantizedWeight& w, int64_t r0, int64_t r1,
                                            int64_t gi, int t, RawGroup<F>& r) {
  const int64_t c = gi * kGroup + 8 * t;  // the lane's first column
  const bool in = c < w.cols;             // cols is a multiple of 16: all 8 or none
  const int64_t rows[2] = {r0, r1};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if constexpr (F == QuantFormat::kNvfp4) {
      r.s[h] = in ? __ldg(w.scale + rows[h] * (w.cols / 16) + c / 16) : 0u;
    } else if constexpr (F == QuantFormat::kMxfp8) {
      r.s[h] = e8m0_to_f32_dev(__ldg(w.scale + rows[h] * (w.cols / 32) + gi));
    }
  }
}

// Group `gi` of rows r0 (= g) and r1 (= g + 8); lanes whose 8 columns lie past cols read zeros.
template <QuantFormat F>
__device__ __forceinline__ RawGroup<F> load_group(const QuantizedWeight& w, int64_t r0, int64_t r1,
                                                  int64_t gi, int t) {
  RawGroup<F> r;
  const int64_t c = gi * kGroup + 8 * t;
  const bool in = c < w.cols;
  const int64_t rows[2] = {r0, r1};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if constexpr (F == QuantFormat::kNvfp4) {
      r.v[h] =
          in ? __ldg(reinterpret_cast<const unsigned int*>(w.data + rows[h] * (w.cols / 2) + c / 2))
             : 0u;
    } else {
      r.v[h] = in ? load_stream8(w.data + rows[h] * w.cols + c) : make_uint2(0, 0);
    }
  }
  load_scales<F>(w, r0, r1, gi, t, r);
  return r;
}

// The same values from a warp's shared-memory stage (`stage` holds groups gb .. gb + kStage - 1
// of the tile's 16 rows; u = gi - gb); `in`: the lane's 8 columns lie inside cols (else zeros).
// The scales come separately (load_scales).
template <QuantFormat F>
__device__ __forceinline__ void read_group(const uint8_t* stage, int u, bool in, int g, int t,
                                           RawGroup<F>& r) {
  using S = Stage<F>;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint8_t* p = stage + (g + 8 * h) * S::kRowStride + u * S::kGroupBytes;
    if constexpr (F == QuantFormat::kNvfp4) {
      r.v[h] = in ? *reinterpret_cast<const uint32_t*>(p + 4 * t) : 0u;
    } else {
      r.v[h] = in ? *reinterpret_cast<const uint2*>(p + 8 * t) : make_uint2(0, 0);
    }
  }
}

// Issues the copies of groups [gb, min(gb + kStage, g_end)) of the tile's 16 rows (o0 ..) into a
// warp's stage: 16 contiguous bytes a lane, consecutive lanes along a row. Rows past the weight
// repeat its last row; bytes past g_end or the row's end are not copied (read_group zeroes what
// lies past cols, and no group past g_end is read).
template <QuantFormat F>
__device__ __forceinline__ void issue_stage(const QuantizedWeight& w, int64_t o0, int64_t gb,
                                            int64_t g_end, uint8_t* stage, int lane) {
  using S = Stage<F>;
  const int64_t row_bytes = F == QuantFormat::kNvfp4 ? w.cols / 2 : w.cols;
  const int64_t end = min(g_end * S::kGroupBytes, row_bytes);
#pragma unroll
  for (int i = 0; i < kTileRows * S::kChunksPerRow / 32; ++i) {
    const int c = i * 32 + lane;
    const int r = c / S::kChunksPerRow, j = c % S::kChunksPerRow;
    const int64_t off = gb * S::kGroupBytes + 16 * j;
    const int64_t row = min(o0 + r, w.rows - 1);
    if (off + 16 <= end)
      cp_async16(smem_addr(stage + r * S::kRowStride + 16 * j), w.data + row * row_bytes + off);
  }
  cp_async_commit();
}

// The scales of one stage as the stream path holds them, a stage ahead: MXFP8 the 8 E8M0 codes of
// each of the lane's two rows packed into two words (4 registers, where 16 decoded floats spill
// the 80-register kernel), NVFP4 each group's two E4M3 codes, FP8 block none (unit_scales).
template <QuantFormat F>
struct StageScales {
  uint32_t code[kStage][2];
};
template <>
struct StageScales<QuantFormat::kMxfp8> {
  uint32_t packed[2][2];  // [row][word]: the code of group u in byte u % 4 of word u / 4
};
template <>
struct StageScales<QuantFormat::kFp8Block> {};

// Stage gb's scales of rows r0, r1 (groups past g_end read as 0; unused). words8: the 8 codes of
// a row are one aligned 8-byte word (the scales 8-byte aligned, the warp's first group and the
// scale row length multiples of 8), read in one load.
template <QuantFormat F>
__device__ __forceinline__ void load_stage_scales(const QuantizedWeight& w, int64_t r0, int64_t r1,
                                                  int gb, int g_end, int t, bool full, bool words8,
                                                  StageScales<F>& sc) {
  if constexpr (F == QuantFormat::kMxfp8) {
    const int64_t rows[2] = {r0, r1};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint8_t* row = w.scale + rows[h] * (w.cols / 32) + gb;
      if (full && words8) {
        const uint2 v = __ldg(reinterpret_cast<const uint2*>(row));
        sc.packed[h][0] = v.x;
        sc.packed[h][1] = v.y;
      } else {
        uint32_t word[2] = {0, 0};
#pragma unroll
        for (int u = 0; u < kStage; ++u)
          if (full || gb + u < g_end) word[u / 4] |= uint32_t(__ldg(row + u)) << (8 * (u % 4));
        sc.packed[h][0] = word[0];
        sc.packed[h][1] = word[1];
      }
    }
  } else if constexpr (F == QuantFormat::kNvfp4) {
#pragma unroll
    for (int u = 0; u < kStage; ++u) {
      if (full || gb + u < g_end) {
        RawGroup<F> r;
        load_scales<F>(w, r0, r1, gb + u, t, r);
        sc.code[u][0] = r.s[0];
        sc.code[u][1] = r.s[1];
      }
    }
  }
}

// Group u's scales from its stage's, into raw.s as load_scales gives them.
template <QuantFormat F>
__device__ __forceinline__ void group_scales(const StageScales<F>& sc, int u, RawGroup<F>& raw) {
  if constexpr (F == QuantFormat::kMxfp8) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
      raw.s[h] = e8m0_to_f32_dev((sc.packed[h][u / 4] >> (8 * (u % 4))) & 0xffu);
  } else if constexpr (F == QuantFormat::kNvfp4) {
    raw.s[0] = sc.code[u][0];
    raw.s[1] = sc.code[u][1];
  }
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

// The B fragments of one x row's 8 values at a lane's columns of a group (xv, BF16) for the
// group's two MMAs, in a_fragments' column order.
template <QuantFormat F>
__device__ __forceinline__ void pack_b(uint4 xv, uint32_t (&b)[2][2]) {
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

// One group's MMAs: its A fragments (a_fragments), then for each x tile j the two MMAs (B fragments
// from load_b(j, b)) and the scale FMAs of its format. u is the group's place in its stage of
// kStage (a multiple of kUnit from the warp's first group); FP8 block: unit_last marks the last
// group of a scale unit (or of the warp's range), unit_scale the unit's scale_inv.
template <QuantFormat F, int kTiles, bool kTable, typename LoadB>
__device__ __forceinline__ void mma_group(const RawGroup<F>& raw, const LoadB& load_b,
                                          const uint32_t* lut, int u, bool unit_last,
                                          float unit_scale, float (&acc)[kTiles][4],
                                          float (&part)[kTiles][4]) {
  constexpr int kUnit = F == QuantFormat::kFp8Block ? 4 : 1;
  uint32_t a[2][4];
  a_fragments<F, kTable>(raw, lut, a);
  if constexpr (F != QuantFormat::kNvfp4) {
    if (u % kUnit == 0) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j) part[j][0] = part[j][1] = part[j][2] = part[j][3] = 0.0f;
    }
  }
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    uint32_t b[2][2];
    load_b(j, b);  // each tile's B fragments just before its MMAs: fewer live registers
    float* c = F == QuantFormat::kNvfp4 ? acc[j] : part[j];
#pragma unroll
    for (int q = 0; q < 2; ++q) mma_bf16(c, a[q][0], a[q][1], a[q][2], a[q][3], b[q][0], b[q][1]);
  }
  if constexpr (F == QuantFormat::kMxfp8) {
    // Each group's sums times its rows' scales: c0, c1 belong to row g, c2, c3 to row g + 8.
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = __fmaf_rn(part[j][e], raw.s[e >> 1], acc[j][e]);
  } else if constexpr (F == QuantFormat::kFp8Block) {
    if (unit_last) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = __fmaf_rn(part[j][e], unit_scale, acc[j][e]);
    }
  }
}

}  // namespace sparkglm::cuda::qgemv
