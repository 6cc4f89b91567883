#pragma once
// y = x W^T for decode rows with W stored in an FP4-Local checkpoint format (MODEL.md section 7),
// dequantized in registers: the weight bytes stream from HBM once per call for all rows, and no
// BF16 copy of W exists anywhere.
//
// Formats (model/weight_formats.h gives the stored layouts; dequantize_linear's FP32 value of
// each weight, the CPU reference, is):
//   NVFP4      w = (e2m1 * e4m3(scale[o][c/16])) * global_scale   (the first product is exact)
//   MXFP8      w = e4m3 * 2^(scale[o][c/32] - 127)
//   FP8 block  w = e4m3 * scale_inv[o/128][c/128]
// HBM floor, bytes per weight (what one call must read; x and y are small beside W):
//   NVFP4      0.5 + 1/16 (E4M3 scale per 16)             = 0.5625 B  (+ 4 B per tensor)
//   MXFP8      1 + 1/32 (E8M0 scale per 32)               = 1.03125 B
//   FP8 block  1 + 4/(128*128) (FP32 scale per 128x128)   = 1.000244 B
// (BF16: 2 B per weight.)
//
// Kernel: tensor cores (mma.m16n8k16, BF16 operands, FP32 accumulate), as gemv_bf16. A block
// takes 16 W rows (the A operand) against all m x rows (B columns, ceil(m / 8) tiles of 8, zero
// columns past m); its S <= 8 warps split k into contiguous ranges. A weight of few 16-row tiles
// (fewer than half the SMs' worth) also splits k over B blocks when the caller lends room for
// their partial sums (GemvPartials), which a second kernel adds in block order.
// Loads (kCurrent, 1-16 rows): each warp streams its rows' bytes into its own shared memory with
// cp.async, 16 contiguous bytes a lane (a warp's load covers 2 rows x 256 bytes, or 4 x 128 for
// NVFP4), the next stage of 8 groups in flight while it computes the current one from there
// (rows padded so that the reads hit 32 banks); a stage wholly inside the warp's range runs
// without per-group guards, and MXFP8 keeps a stage's scale codes packed (one 8-byte load a row
// where aligned). kBaseline, and kCurrent past 16 rows, read each fragment's 4 or 8 bytes straight
// from global memory. Both read the same values into the same MMAs in the same order: the same
// bits.
// W is dequantized in registers to BF16 fragments EXACTLY, and the scales BF16 cannot carry are
// applied in FP32 outside the MMA:
//   NVFP4      A = e2m1 * e4m3 block scale (at most 6 significant bits, 2^-10 .. 2688: exact in
//              BF16), made as each byte's E2M1 pair from a 32 KB shared-memory table times the
//              scale in one BF16x2 FMA (bf16_pairs.cuh); the FP32 global scale multiplies the
//              finished sum once.
//   MXFP8      A = the E4M3 value (exact in BF16); each 32-column group's MMA sum (from zero) is
//              multiplied by its row's 2^(e - 127) with one FP32 FMA into the running sum. No
//              scale is folded into BF16, so E8M0 codes near 0 or 254 are as exact as on the CPU.
//   FP8 block  A = the E4M3 value; each 128-column block's MMA sum (from zero) times its FP32
//              scale_inv, one FMA into the running sum.
// So a one-hot x row reads back dequantize_linear's FP32 bits (one exact product, one rounding
// where the CPU rounds). E4M3 NaN codes (0x7f, 0xff; no quantizer emits them) read as +-480.
//
// Numerical contract (batch invariance, docs/cuda-operators.md): x is BF16 (the activation dtype
// gemv_bf16 takes); y is FP32. k is cut into 32-column groups; block b of B takes the units
// [b U / B, (b + 1) U / B) (U units of 1 group, 4 for FP8 block) and its warp w of S the w-th of S
// contiguous parts of them (S and B from the weight's shape and whether partial room is lent:
// quantized_linear.cu's plan_for), in increasing order, each group as two MMAs over the lane
// quads' columns 8t .. 8t + 3 and 8t + 4 .. 8t + 7; warp 0 adds the S warp sums in warp order,
// then the B block sums are added in block order. The MMA of one output column never reads
// another column, and the order depends on the weight's shape alone: never on m or the rows
// beside a row, so a row's bits are the same alone or among 32 (tested bitwise). Error: each term
// passes through at most cols / 16 MMA steps (the tensor core adds exact products; it may align
// and truncate, 2^-23 relative), cols / 32 FMAs, S B - 1 <= 63 additions and one global-scale
// product (tests state the bound).
//
// Roofline (H200: ~4.2-4.8 TB/s, 132 SMs, ~18 B/clock/SM of HBM): an SM must consume ~32
// NVFP4 or ~18 8-bit weights a clock. Dequantizing costs ~1.5 integer/BF16x2 instructions per
// 8-bit weight (shift-mask an E4M3 pair into BF16 bits, one BF16x2 FMA) and ~2 per NVFP4 weight
// (a table lookup and a BF16x2 FMA per byte; the 2026-12-02 kernel's FP32 decode of each element
// cost ~20, measured); one MMA consumes 256 weights for up to 8 rows, and the scale FMAs cost 4 per
// 256 weights a tile: ~20-35 % of the issue rate at the 8-bit floor, so the kernel stays bound by
// HBM up to 32 rows (x tiles multiply MMAs and x loads, not weight bytes). Latency: each warp
// keeps the next stage of 8 groups (4 KB for 8-bit) in flight while it computes the current one;
// with 12-24 resident warps an SM keeps ~48-96 KB in flight, above the ~36 KB that ~1 us of
// latency at 18 B/clock needs. The baseline issued each warp's 8 groups as 8-byte loads of 32
// bytes a row and used them before issuing more: 1.1-1.5 TB/s on the large shapes (Nsight
// Compute, bench/results/h200-2026-12-03-s14), and 15 us for a 0.6 MB weight of 8 tiles.
// Measured (H200, bundle 2026-12-04-g1-quant-lean-h200): 74 % of the floor on the LM head at 1
// row, 30-53 % on the 25-67 MB weights; small ones (~1-5 us) are bound by launch and one load
// latency. The arithmetic above is the floor of the work, not what the compiler emitted: Nsight
// Compute counted ~155 warp instructions per 512 weights before the guard-free stages (issue
// slots 40 % busy at 14 resident warps an SM), so the kernel is bound by issue and latency rather
// than by HBM (docs/cuda-operators.md, "2026-12-04").
//
// No allocation, no host synchronisation: safe to capture in a CUDA graph.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

enum class QuantFormat : uint8_t {
  kNvfp4,     // U8 [rows, cols/2] + E4M3 [rows, cols/16] + FP32 global scale
  kMxfp8,     // E4M3 [rows, cols] + E8M0 [rows, cols/32]
  kFp8Block,  // E4M3 [rows, cols] + FP32 [ceil(rows/128), ceil(cols/128)]
};

const char* quant_format_name(QuantFormat f);

// Which generation of the quantized decode kernels runs. The engine always takes kCurrent.
// kBaseline is the 2026-12-02 kernel (each fragment loaded from global memory into registers,
// NVFP4 decoded per element in FP32, 2 blocks an SM; the quantized MoE's own baseline is
// moe_quant_baseline.h), kept for one release so that bench/cuda/g1_operators times old and new
// in the same run; both give the same bits (tested). kCurrent streams through shared memory at
// 1-16 rows where a row's bytes are a multiple of 16 and the data 16-byte aligned (every
// production shape), and runs the baseline's loads otherwise. Remove kBaseline after that run.
enum class QuantKernel : uint8_t { kCurrent, kBaseline };

// Room for the partial sums of a GEMV whose k is split over blocks (Gemm::split_partials): the
// split is taken only when [B][32][rows] floats fit, judged at 32 rows whatever m is, so that a
// row's bits never depend on m. Empty: k is split over each block's warps only.
struct GemvPartials {
  float* data = nullptr;
  size_t floats = 0;
};

// A projection weight [rows, cols] (nn.Linear layout: rows = outputs, cols = the reduction) as it
// lies on the device in its checkpoint format. A loader fills it from the checkpoint's tensors
// (`<stem>.weight`, `.weight_scale`, `.weight_scale_inv`, `.weight_scale_2`); the buffers stay the
// loader's. Row-major and dense: row o of `data` starts at o * data_row_bytes().
struct QuantizedWeight {
  QuantFormat format = QuantFormat::kMxfp8;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;     // NVFP4: packed E2M1 (low nibble = even column); else E4M3
  const uint8_t* scale = nullptr;    // NVFP4: E4M3 [rows, cols/16]; MXFP8: E8M0 [rows, cols/32]
  const float* scale_inv = nullptr;  // FP8 block: [ceil(rows/128), ceil(cols/128)]
  float global_scale = 1.0f;         // NVFP4: weight_scale_2 (a host value: one FP32 per tensor)

  int64_t data_row_bytes() const { return format == QuantFormat::kNvfp4 ? cols / 2 : cols; }
  // The bytes a GEMV must read (the floor's numerator): values and scales.
  double bytes() const;
};

// Why `w` cannot run through quantized_gemv (empty when it can): cols a multiple of 16 (and of 32
// for MXFP8), the scale pointers of its format present, data 16-byte aligned (8-byte for NVFP4).
const char* quantized_weight_problem(const QuantizedWeight& w);

inline constexpr int kQuantGemvMaxRows = 32;

// x: [m, w.cols] BF16 bits, 16-byte aligned, 1 <= m <= 32 (decode rows); y: [m, w.rows] FP32.
// m beyond 32 or an unsupported weight is an Error(kInvalidArgument); m == 0 does nothing.
// `partials`, when lent, is used on `stream` only and must not be in use by another stream.
void quantized_gemv(const uint16_t* x, int64_t m, const QuantizedWeight& w, float* y,
                    cudaStream_t stream, QuantKernel kernel = QuantKernel::kCurrent,
                    const GemvPartials& partials = {});

}  // namespace sparkglm::cuda
