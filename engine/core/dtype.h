#pragma once
// Element types of checkpoints and caches, and the exact conversions between them.
// Every narrowing conversion rounds to nearest even (MODEL.md section 7).
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace sparkglm {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // E4M3 "fn": no infinities, max 448, one NaN pattern per sign
  kU8,      // raw bytes; packed FP4 (E2M1, two per byte, low nibble first) lives here
  kF8E8M0,  // exponent-only scale of MXFP8 (value 2^(e-127))
  kI32,
  kI64,
};

// The safetensors name ("F32", "BF16", "F8_E4M3", ...), and back.
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// Bytes per element.
int dtype_size(DType t);

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_f32(uint16_t h) {
  return bits_to_f32(uint32_t(h) << 16);
}
// Round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float e4m3_to_f32(uint8_t b);
// Saturates to +-448 (the "fn" format has no infinity); NaN maps to 0x7f.
uint8_t f32_to_e4m3(float f);
// One FP4 E2M1 value from the low 4 bits of `nibble`.
float e2m1_to_f32(uint8_t nibble);
inline float e8m0_to_f32(uint8_t e) {
  return e == 0xff ? bits_to_f32(0x7fc00000u)
                   : (e == 0 ? bits_to_f32(0x00400000u) : bits_to_f32(uint32_t(e) << 23));
}

}  // namespace sparkglm
