#include "engine/core/dtype.h"

#include <algorithm>
#include <cmath>

namespace sparkglm {

namespace {
struct NamedType {
  DType type;
  std::string_view name;
  int size;
};
constexpr NamedType kTypes[] = {
    {DType::kF32, "F32", 4},        {DType::kF16, "F16", 2}, {DType::kBF16, "BF16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kU8, "U8", 1},   {DType::kF8E8M0, "F8_E8M0", 1},
    {DType::kI32, "I32", 4},        {DType::kI64, "I64", 8},
};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& n : kTypes)
    if (n.type == t) return n.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& n : kTypes)
    if (n.name == name) return n.type;
  return std::nullopt;
}

int dtype_size(DType t) {
  for (const auto& n : kTypes)
    if (n.type == t) return n.size;
  return 0;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
  // Subnormal: man * 2^-24, exact in FP32.
  const float v = std::ldexp(float(man), -24);
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_to_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return uint16_t(sign | 0x7e00u);
  if (a >= 65520.0f) return uint16_t(sign | 0x7c00u);  // rounds to infinity
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal range: quantum 2^-24; nearbyint rounds half to even.
    return uint16_t(sign | uint16_t(std::nearbyint(std::ldexp(a, 24))));
  }
  uint32_t bits = f32_to_bits(a);
  bits += 0xfffu + ((bits >> 13) & 1u);  // round the 13 dropped bits to nearest even
  const uint32_t exp = (bits >> 23) - 112u;
  return uint16_t(sign | (exp << 10) | ((bits >> 13) & 0x3ffu));
}

float e4m3_to_f32(uint8_t b) {
  const bool neg = b & 0x80u;
  const uint32_t exp = (b >> 3) & 0xfu;
  const uint32_t man = b & 0x7u;
  float v;
  if (exp == 0xf && man == 0x7) {
    v = bits_to_f32(0x7fc00000u);
  } else if (exp == 0) {
    v = std::ldexp(float(man), -9);  // subnormal: man/8 * 2^-6
  } else {
    v = std::ldexp(1.0f + float(man) / 8.0f, int(exp) - 7);
  }
  return neg ? -v : v;
}

uint8_t f32_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a >= 448.0f) return uint8_t(sign | 0x7e);  // saturate to the largest finite value
  int e;
  std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1)
  // Quantum of the binade holding a: 3 mantissa bits, subnormal below 2^-6.
  const int exp_unbiased = std::max(e - 1, -6);
  const float quantum = std::ldexp(1.0f, exp_unbiased - 3);
  const float q = std::nearbyint(a / quantum) * quantum;  // exact division by a power of two
  if (q == 0.0f) return sign;
  if (q >= 448.0f) return uint8_t(sign | 0x7e);
  int qe;
  const float qm = std::frexp(q, &qe);
  if (qe - 1 < -6) return uint8_t(sign | uint8_t(std::ldexp(q, 9)));  // subnormal
  const uint8_t exp_field = uint8_t(qe - 1 + 7);
  const uint8_t man_field = uint8_t(std::nearbyint((qm * 2.0f - 1.0f) * 8.0f));
  return uint8_t(sign | (exp_field << 3) | man_field);
}

float e2m1_to_f32(uint8_t nibble) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kValues[nibble & 0x7u];
  return (nibble & 0x8u) ? -v : v;
}

}  // namespace sparkglm
