#pragma once
// y = x W^T for decode rows with W stored in an FP4-Local checkpoint format (MODEL.md section 7),
// dequantized in registers: the weight bytes stream from HBM once per call for all rows, and no
// BF16 copy of W exists anywhere.
//
// Formats (model/weight_formats.h gives the stored layouts; each weight value is computed in FP32
// exactly as dequantize_linear computes it, so it has the CPU's bits):
//   NVFP4      w = (e2m1 * e4m3(scale[o][c/16])) * global_scale   (the first product is exact)
//   MXFP8      w = e4m3 * 2^(scale[o][c/32] - 127)
//   FP8 block  w = e4m3 * scale_inv[o/128][c/128]
// HBM floor, bytes per weight (what one call must read; x and y are small beside W):
//   NVFP4      0.5 + 1/16 (E4M3 scale per 16)             = 0.5625 B  (+ 4 B per tensor)
//   MXFP8      1 + 1/32 (E8M0 scale per 32)               = 1.03125 B
//   FP8 block  1 + 4/(128*128) (FP32 scale per 128x128)   = 1.000244 B
// (BF16: 2 B per weight.)
//
// Numerical contract (batch invariance, docs/cuda-operators.md): x is BF16 (the activation dtype
// gemv_bf16 takes), widened exactly to FP32; y is FP32. Every output y[r][o] is computed by one
// warp: the row's k values are cut into 16-value chunks, lane l (of 32) takes chunks l, l+32,
// l+64, ... in increasing order and accumulates each chunk's values in increasing column with one
// FMA each, from +0; the 32 lane sums are then added by the fixed xor butterfly of warp_sum. The
// order depends on k alone: never on m, on the rows beside r, or on n, so a row's bits are the
// same whether it runs alone or among 32 (tested bitwise).
//
// Work split: a warp holds R W rows (4 for up to 8 x rows, 2 beyond) and all m x rows, so every
// weight chunk it loads feeds every row of the step, and each x chunk it loads feeds R W rows. The
// arithmetic is FP32 FMA on CUDA cores: 2 m FLOPs per weight, so from about 4 rows (NVFP4) or 8
// (8-bit formats) the kernel is bound by the FP32 rate rather than HBM on an H200. Not yet run on
// a GPU; the G1 rows (bench/cuda/g1_cases_linear.cpp) will say where it stands.
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
void quantized_gemv(const uint16_t* x, int64_t m, const QuantizedWeight& w, float* y,
                    cudaStream_t stream);

}  // namespace sparkglm::cuda
