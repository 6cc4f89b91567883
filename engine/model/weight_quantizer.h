#pragma once
// Quantization of an FP32 projection [rows, cols] into the stored formats of MODEL.md section 7,
// the exact inverse direction of weight_formats.h's dequantization: one function per format, every
// element rounded once to nearest, ties to the even code.
//
// Each quotient w / scale is formed in FP64 and rounded once. w and the scale are FP32 (24-bit
// significands), so a quotient that is not itself a tie lies at least 2^-30 (relative) away from
// one, far outside FP64's 2^-53 rounding: rounding the FP64 quotient gives the RNE of the real one.
//
// Saturation: the element formats have no infinities. |x| beyond the largest finite value rounds
// to it (E4M3: 448, E2M1: 6). A non-finite weight is an Error(kInvalidArgument) naming the tensor
// and the element.
//
// Scales (what a dequantizer multiplies by; all-zero blocks and tensors get scale 1):
//   block FP8  scale_inv[b] = amax_b / 448 (FP32 division), one per 128x128 block
//   MXFP8      2^k, k the smallest integer with amax_b <= 448 * 2^k (nothing saturates), clamped to
//              [-127, 127]; stored as the E8M0 code k + 127; one per 32 values of a row
//   NVFP4      weight_scale_2 = amax / (6 * 448) over the tensor (FP32 division); one E4M3 scale
//              per 16 values of a row, round_e4m3(amax_b / (6 * weight_scale_2)); a block whose
//              scale rounds to 0 stores zeros
#include <cstdint>
#include <string_view>
#include <vector>

namespace sparkglm {

// One value in an element format, rounded to nearest even, saturating (see above). -0 and values
// that round to zero keep their sign bit.
uint8_t round_e4m3(double x);  // E4M3fn code
uint8_t round_e2m1(double x);  // E2M1 code in the low 4 bits: sign bit 3, exponent 2, mantissa 1

struct BlockFp8Weight {
  std::vector<uint8_t> values;   // E4M3 [rows, cols]
  std::vector<float> scale_inv;  // [ceil(rows/128), ceil(cols/128)]
};

struct Mxfp8Weight {
  std::vector<uint8_t> values;  // E4M3 [rows, cols]
  std::vector<uint8_t> scale;   // E8M0 [rows, cols/32]
};

struct Nvfp4Weight {
  std::vector<uint8_t> packed;  // [rows, cols/2]: two E2M1 per byte, low nibble = even column
  std::vector<uint8_t> scale;   // E4M3 [rows, cols/16]
  float scale_2 = 1.0f;         // the tensor's global scale
};

// `name` names the tensor in errors. cols must divide by 32 (MXFP8) or 16 (NVFP4): an
// Error(kInvalidArgument) otherwise.
BlockFp8Weight quantize_block_fp8(const float* w, int64_t rows, int64_t cols,
                                  std::string_view name);
Mxfp8Weight quantize_mxfp8(const float* w, int64_t rows, int64_t cols, std::string_view name);
Nvfp4Weight quantize_nvfp4(const float* w, int64_t rows, int64_t cols, std::string_view name);

// The NVFP4 block rule applied to values that are then used dequantized (spark mode's FP4
// activations and converted weights): x[0..n) in place becomes e2m1 * e4m3(block scale) * scale_2,
// one scale per 16 values (the last block may be shorter). Non-finite values are the caller's to
// exclude.
void round_trip_nvfp4(float* x, int64_t n, float scale_2);

// weight_scale_2 of NVFP4 for values whose largest magnitude is `amax`: amax / (6 * 448), or 1 for
// amax 0.
float nvfp4_global_scale(float amax);

}  // namespace sparkglm
