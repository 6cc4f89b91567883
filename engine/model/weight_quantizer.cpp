#include "engine/model/weight_quantizer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/core/dtype.h"
#include "engine/core/error.h"

namespace sparkglm {
namespace {

constexpr int64_t kFp8Block = 128;
constexpr int64_t kMxBlock = 32;
constexpr int64_t kNvBlock = 16;
constexpr double kE4m3Max = 448.0;
constexpr double kE2m1Max = 6.0;

[[noreturn]] void refuse(std::string_view name, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "quantizing '" + std::string(name) + "': " + what);
}

void check_shape(std::string_view name, int64_t rows, int64_t cols, int64_t divisor,
                 const char* format) {
  if (rows <= 0 || cols <= 0)
    refuse(name, "[" + std::to_string(rows) + ", " + std::to_string(cols) + "] is not a matrix");
  if (cols % divisor != 0)
    refuse(name, std::string(format) + " needs cols divisible by " + std::to_string(divisor) +
                     ", got " + std::to_string(cols));
}

// Largest |w| of a row segment; a non-finite value is refused, naming its element.
float amax_of(const float* w, int64_t n, std::string_view name, int64_t first, int64_t cols) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(w[i]))
      refuse(name, "element [" + std::to_string((first + i) / cols) + ", " +
                       std::to_string((first + i) % cols) + "] is not finite");
    m = std::max(m, std::fabs(w[i]));
  }
  return m;
}

// The E2M1 magnitudes by code, and the RNE quantum of each binade.
constexpr double kE2m1Values[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

}  // namespace

uint8_t round_e4m3(double x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(x);
  if (a >= kE4m3Max) return uint8_t(sign | 0x7e);
  int e;
  std::frexp(a, &e);                                       // a = m * 2^e, m in [0.5, 1)
  const int binade = std::max(e - 1, -6);                  // subnormals share the quantum of 2^-6
  const double quantum = std::ldexp(1.0, binade - 3);      // 3 mantissa bits
  const double q = std::nearbyint(a / quantum) * quantum;  // exact: a power-of-two division
  if (q == 0.0) return sign;
  if (q >= kE4m3Max) return uint8_t(sign | 0x7e);
  int qe;
  const double qm = std::frexp(q, &qe);
  if (qe - 1 < -6) return uint8_t(sign | uint8_t(std::ldexp(q, 9)));  // subnormal: q / 2^-9
  const uint8_t exp_field = uint8_t(qe - 1 + 7);
  const uint8_t man_field = uint8_t(std::ldexp(qm * 2.0 - 1.0, 3));
  return uint8_t(sign | (exp_field << 3) | man_field);
}

uint8_t round_e2m1(double x) {
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const double a = std::fabs(x);
  if (a >= kE2m1Max) return uint8_t(sign | 7);
  // Quantum 0.5 below 2, 1 in [2, 4), 2 in [4, 6]: an even multiple of the quantum is an even
  // code (mantissa bit 0), so rounding the multiple half-to-even is RNE on the codes.
  const double quantum = a < 2.0 ? 0.5 : (a < 4.0 ? 1.0 : 2.0);
  const double q = std::nearbyint(a / quantum) * quantum;
  uint8_t code = 0;
  while (kE2m1Values[code] != q) ++code;  // q is one of the 8 magnitudes
  return uint8_t(sign | code);
}

float nvfp4_global_scale(float amax) {
  return amax > 0.0f ? amax / float(kE2m1Max * kE4m3Max) : 1.0f;
}

BlockFp8Weight quantize_block_fp8(const float* w, int64_t rows, int64_t cols,
                                  std::string_view name) {
  check_shape(name, rows, cols, 1, "block FP8");
  const int64_t sr = (rows + kFp8Block - 1) / kFp8Block, sc = (cols + kFp8Block - 1) / kFp8Block;
  BlockFp8Weight out{std::vector<uint8_t>(size_t(rows * cols)),
                     std::vector<float>(size_t(sr * sc))};
  for (int64_t br = 0; br < sr; ++br) {
    const int64_t r0 = br * kFp8Block, r1 = std::min(rows, r0 + kFp8Block);
    for (int64_t bc = 0; bc < sc; ++bc) {
      const int64_t c0 = bc * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r)
        amax = std::max(amax, amax_of(w + r * cols + c0, c1 - c0, name, r * cols + c0, cols));
      const float scale = amax > 0.0f ? amax / float(kE4m3Max) : 1.0f;
      out.scale_inv[size_t(br * sc + bc)] = scale;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c)
          out.values[size_t(r * cols + c)] = round_e4m3(double(w[r * cols + c]) / double(scale));
    }
  }
  return out;
}

Mxfp8Weight quantize_mxfp8(const float* w, int64_t rows, int64_t cols, std::string_view name) {
  check_shape(name, rows, cols, kMxBlock, "MXFP8");
  const int64_t sc = cols / kMxBlock;
  Mxfp8Weight out{std::vector<uint8_t>(size_t(rows * cols)),
                  std::vector<uint8_t>(size_t(rows * sc))};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < sc; ++b) {
      const float* x = w + r * cols + b * kMxBlock;
      const double amax = amax_of(x, kMxBlock, name, r * cols + b * kMxBlock, cols);
      int k = 0;
      if (amax > 0.0) {
        k = std::ilogb(amax) - 8;  // 448 * 2^k brackets amax within a step or two
        while (std::ldexp(kE4m3Max, k) < amax) ++k;
        while (std::ldexp(kE4m3Max, k - 1) >= amax) --k;
        k = std::clamp(k, -127, 127);
      }
      out.scale[size_t(r * sc + b)] = uint8_t(k + 127);
      for (int64_t i = 0; i < kMxBlock; ++i)
        out.values[size_t(r * cols + b * kMxBlock + i)] = round_e4m3(std::ldexp(double(x[i]), -k));
    }
  }
  return out;
}

namespace {

// One NVFP4 block: its E4M3 scale code, and its E2M1 codes into `codes`.
uint8_t nvfp4_block(const float* x, int64_t n, float amax, float scale_2, uint8_t* codes) {
  const uint8_t scale_code = round_e4m3(double(amax) / (kE2m1Max * double(scale_2)));
  const double d = double(e4m3_to_f32(scale_code)) * double(scale_2);  // exact in FP64
  for (int64_t i = 0; i < n; ++i) codes[i] = d > 0.0 ? round_e2m1(double(x[i]) / d) : 0;
  return scale_code;
}

}  // namespace

Nvfp4Weight quantize_nvfp4(const float* w, int64_t rows, int64_t cols, std::string_view name) {
  check_shape(name, rows, cols, kNvBlock, "NVFP4");
  const int64_t sc = cols / kNvBlock;
  Nvfp4Weight out{std::vector<uint8_t>(size_t(rows * cols / 2)),
                  std::vector<uint8_t>(size_t(rows * sc)), 1.0f};
  float amax = 0.0f;
  for (int64_t r = 0; r < rows; ++r)
    amax = std::max(amax, amax_of(w + r * cols, cols, name, r * cols, cols));
  out.scale_2 = nvfp4_global_scale(amax);
  uint8_t codes[kNvBlock];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < sc; ++b) {
      const float* x = w + r * cols + b * kNvBlock;
      float block_amax = 0.0f;
      for (int64_t i = 0; i < kNvBlock; ++i) block_amax = std::max(block_amax, std::fabs(x[i]));
      out.scale[size_t(r * sc + b)] = nvfp4_block(x, kNvBlock, block_amax, out.scale_2, codes);
      for (int64_t i = 0; i < kNvBlock; i += 2)
        out.packed[size_t((r * cols + b * kNvBlock + i) / 2)] =
            uint8_t(codes[i] | (codes[i + 1] << 4));
    }
  }
  return out;
}

void round_trip_nvfp4(float* x, int64_t n, float scale_2) {
  uint8_t codes[kNvBlock];
  for (int64_t b = 0; b < n; b += kNvBlock) {
    const int64_t len = std::min(kNvBlock, n - b);
    float block_amax = 0.0f;
    for (int64_t i = 0; i < len; ++i) block_amax = std::max(block_amax, std::fabs(x[b + i]));
    const float scale = e4m3_to_f32(nvfp4_block(x + b, len, block_amax, scale_2, codes));
    // As weight_formats.cpp dequantizes: e2m1 * e4m3 is exact, the global scale rounds once.
    for (int64_t i = 0; i < len; ++i) x[b + i] = (e2m1_to_f32(codes[i]) * scale) * scale_2;
  }
}

}  // namespace sparkglm
