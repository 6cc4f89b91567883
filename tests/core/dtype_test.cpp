#include "engine/core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace sparkglm {
namespace {

// Every finite positive value of a format, in increasing order of both value and bit pattern, so
// neighbours in the list are neighbours on the number line and "even" means an even bit pattern.
template <typename Decode>
std::vector<std::pair<uint32_t, float>> positive_values(uint32_t count, Decode decode) {
  std::vector<std::pair<uint32_t, float>> out;
  for (uint32_t b = 0; b < count; ++b) {
    const float v = decode(b);
    if (std::isfinite(v)) out.emplace_back(b, v);
  }
  return out;
}

// Checks that `encode` rounds every midpoint between neighbours to the even one and every value
// just off a midpoint to the nearer one. Midpoints of these narrow formats are exact in FP32.
template <typename Encode>
void expect_round_to_nearest_even(const std::vector<std::pair<uint32_t, float>>& values,
                                  Encode encode, uint32_t sign_bit, const char* format) {
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const auto [lo_bits, lo] = values[i];
    const auto [hi_bits, hi] = values[i + 1];
    const float mid = lo + (hi - lo) / 2;
    ASSERT_TRUE(mid > lo && mid < hi) << format << " midpoint of " << lo << " and " << hi;
    const uint32_t even = (lo_bits % 2 == 0) ? lo_bits : hi_bits;
    ASSERT_EQ(encode(mid), even) << format << ": tie " << mid << " between " << lo << " and " << hi;
    ASSERT_EQ(encode(std::nextafter(mid, 0.0f)), lo_bits) << format << ": just below " << mid;
    ASSERT_EQ(encode(std::nextafter(mid, INFINITY)), hi_bits) << format << ": just above " << mid;
    ASSERT_EQ(encode(-mid), even | sign_bit) << format << ": -" << mid;
  }
}

TEST(Dtype, NamesAndSizesRoundTrip) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kU8,
                  DType::kF8E8M0, DType::kI32, DType::kI64}) {
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
  }
  EXPECT_EQ(dtype_name(DType::kF8E4M3), "F8_E4M3");
  EXPECT_EQ(dtype_size(DType::kBF16), 2);
  EXPECT_EQ(dtype_size(DType::kI64), 8);
  EXPECT_FALSE(dtype_from_name("F64").has_value());
  EXPECT_FALSE(dtype_from_name("f32").has_value());
}

TEST(Dtype, EveryBf16PatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = bf16_to_f32(uint16_t(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(f32_to_bf16(f), b) << std::hex << b;
    }
  }
}

TEST(Dtype, EveryF16PatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = f16_to_f32(uint16_t(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(f32_to_f16(f), b) << std::hex << b;
    }
  }
}

TEST(Dtype, EveryE4m3PatternRoundTrips) {
  for (uint32_t b = 0; b < 0x100; ++b) {
    const float f = e4m3_to_f32(uint8_t(b));
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << b;
    } else {
      ASSERT_EQ(f32_to_e4m3(f), b) << std::hex << b;
    }
  }
}

TEST(Dtype, E4m3DecodesKnownValues) {
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x3b), 1.375f);
  EXPECT_EQ(e4m3_to_f32(0x77), 240.0f);  // 0x78 is 256: the exponent field 15 is a normal binade
  EXPECT_EQ(e4m3_to_f32(0x78), 256.0f);
}

TEST(Dtype, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, 1.0 is even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, rounds up to even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7f7fffff)), 0x7f80);          // FLT_MAX overflows to inf
  expect_round_to_nearest_even(
      positive_values(0x7f80, [](uint32_t b) { return bf16_to_f32(uint16_t(b)); }),
      [](float f) { return uint32_t(f32_to_bf16(f)); }, 0x8000, "bf16");
}

TEST(Dtype, F16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);      // half the smallest subnormal
  EXPECT_EQ(f32_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);  // 1.5 subnormal quanta
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // the tie above the largest finite goes to infinity
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  expect_round_to_nearest_even(
      positive_values(0x7c00, [](uint32_t b) { return f16_to_f32(uint16_t(b)); }),
      [](float f) { return uint32_t(f32_to_f16(f)); }, 0x8000, "f16");
}

TEST(Dtype, E4m3RoundsToNearestEven) {
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);  // tie between 1.0 and 1.125
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);  // tie between 1.125 and 1.25
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(f32_to_e4m3(3 * std::ldexp(1.0f, -10)), 0x02);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -100)), 0x00);
  expect_round_to_nearest_even(
      positive_values(0x7f, [](uint32_t b) { return e4m3_to_f32(uint8_t(b)); }),
      [](float f) { return uint32_t(f32_to_e4m3(f)); }, 0x80, "e4m3");
}

TEST(Dtype, E4m3SaturatesAt448) {
  for (float f : {448.0f, 449.0f, 464.0f, 480.0f, 1e6f, 3.4e38f, INFINITY}) {
    EXPECT_EQ(f32_to_e4m3(f), 0x7e) << f;
    EXPECT_EQ(f32_to_e4m3(-f), 0xfe) << -f;
  }
  EXPECT_EQ(f32_to_e4m3(NAN), 0x7f);
}

TEST(Dtype, E2m1TableIsTheOcpFp4Values) {
  const float want[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                          -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  for (uint8_t n = 0; n < 16; ++n) {
    EXPECT_EQ(e2m1_to_f32(n), want[n]) << int(n);
    EXPECT_EQ(std::signbit(e2m1_to_f32(n)), n >= 8) << int(n);
    EXPECT_EQ(e2m1_to_f32(uint8_t(n | 0xf0)), want[n]) << "high bits must be ignored";
  }
}

TEST(Dtype, E8m0IsAPowerOfTwo) {
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(128), 2.0f);
  EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_to_f32(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
}

}  // namespace
}  // namespace sparkglm
