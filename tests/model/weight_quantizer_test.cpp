#include "engine/model/weight_quantizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/model/weight_formats.h"

namespace sparkglm {
namespace {

// Nearest of the non-negative codes 0..last (increasing magnitudes) to a >= 0 by brute force:
// equal distances go to the even code (mantissa bit 0); beyond the largest value, the largest.
template <typename Decode>
uint8_t nearest_code(double a, int last, Decode decode) {
  if (a >= double(decode(uint8_t(last)))) return uint8_t(last);
  int best = 0;
  for (int c = 1; c <= last; ++c) {
    const double d = std::fabs(double(decode(uint8_t(c))) - a);
    const double bd = std::fabs(double(decode(uint8_t(best))) - a);
    if (d < bd || (d == bd && c % 2 == 0)) best = c;
  }
  return uint8_t(best);
}

uint8_t e4m3_reference(double x) {
  const uint8_t m = nearest_code(std::fabs(x), 0x7e, e4m3_to_f32);
  return uint8_t((std::signbit(x) ? 0x80 : 0) | m);
}
uint8_t e2m1_reference(double x) {
  const uint8_t m = nearest_code(std::fabs(x), 7, e2m1_to_f32);
  return uint8_t((std::signbit(x) ? 0x8 : 0) | m);
}

// Every code's value, every midpoint between neighbours (the ties), values a hair either side of
// them, zeros, the largest value and beyond, and random values over the format's range.
std::vector<double> probes(int last, float (*decode)(uint8_t), double top) {
  std::vector<double> v = {0.0, -0.0, top, -top, top * 1.03, top * 1.5, 1e30, -1e30};
  for (int c = 0; c <= last; ++c) {
    const double x = decode(uint8_t(c));
    v.insert(v.end(), {x, -x});
    if (c < last) {
      const double mid = 0.5 * (x + double(decode(uint8_t(c + 1))));
      for (double m : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e9)})
        v.insert(v.end(), {m, -m});
    }
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-14, 0);
  for (int i = 0; i < 20000; ++i) v.push_back(u(rng) * top * std::ldexp(1.0, e(rng)));
  return v;
}

TEST(WeightQuantizer, RoundE4m3IsTheNearestCodeWithTiesToEven) {
  for (double x : probes(0x7e, e4m3_to_f32, 448.0))
    ASSERT_EQ(round_e4m3(x), e4m3_reference(x)) << "x = " << x;
  // Subnormals: 2^-9 steps below 2^-6, the tie between the two smallest rounds to zero.
  EXPECT_EQ(round_e4m3(std::ldexp(1.0, -10)), 0x00);
  EXPECT_EQ(round_e4m3(3 * std::ldexp(1.0, -10)), 0x02);
  EXPECT_EQ(round_e4m3(-std::ldexp(1.0, -12)), 0x80);  // keeps its sign
  EXPECT_EQ(round_e4m3(1e9), 0x7e);                    // saturates, no infinity
  EXPECT_EQ(round_e4m3(-500.0), 0xfe);
}

TEST(WeightQuantizer, RoundE4m3AgreesWithTheCacheConversionOnFloats) {
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const float f = bits_to_f32(uint32_t(rng()) & 0xc7ffffffu);  // |f| < 2^64, both signs
    if (!std::isfinite(f)) continue;
    ASSERT_EQ(round_e4m3(double(f)), f32_to_e4m3(f)) << "f = " << f;
  }
}

TEST(WeightQuantizer, RoundE2m1IsTheNearestCodeWithTiesToEven) {
  for (double x : probes(7, e2m1_to_f32, 6.0))
    ASSERT_EQ(round_e2m1(x), e2m1_reference(x)) << "x = " << x;
  // The ties, spelled out: each goes to the neighbour with mantissa bit 0.
  const std::vector<std::pair<double, float>> ties = {{0.25, 0.0f}, {0.75, 1.0f}, {1.25, 1.0f},
                                                      {1.75, 2.0f}, {2.5, 2.0f},  {3.5, 4.0f},
                                                      {5.0, 4.0f},  {7.0, 6.0f}};
  for (auto [x, want] : ties) EXPECT_EQ(e2m1_to_f32(round_e2m1(x)), want) << "x = " << x;
}

// A weight with magnitudes over many binades (subnormal ranges of the blocks included), zeros and
// ties sprinkled in.
std::vector<float> sample_weight(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-16, 2);
  std::vector<float> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = i % 97 == 0 ? 0.0f : std::ldexp(u(rng), e(rng));
    if (i % 89 == 0) w[i] = 0.3125f;  // a tie in E4M3 at unit scale: between 0.3125 +- 1/64
  }
  return w;
}

template <typename T>
void put(OwnedTensors& src, const std::string& name, DType dtype, std::vector<int64_t> shape,
         const std::vector<T>& values) {
  std::memcpy(src.add(name, dtype, std::move(shape)), values.data(), values.size() * sizeof(T));
}

std::vector<float> dequantized(const BlockFp8Weight& q, int64_t rows, int64_t cols) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kF8E4M3, {rows, cols}, q.values);
  put(src, "x.weight_scale_inv", DType::kF32, {(rows + 127) / 128, (cols + 127) / 128},
      q.scale_inv);
  return dequantize_linear(src, "x.weight", rows, cols);
}
std::vector<float> dequantized(const Mxfp8Weight& q, int64_t rows, int64_t cols) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kF8E4M3, {rows, cols}, q.values);
  put(src, "x.weight_scale", DType::kF8E8M0, {rows, cols / 32}, q.scale);
  return dequantize_linear(src, "x.weight", rows, cols);
}
std::vector<float> dequantized(const Nvfp4Weight& q, int64_t rows, int64_t cols) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kU8, {rows, cols / 2}, q.packed);
  put(src, "x.weight_scale", DType::kF8E4M3, {rows, cols / 16}, q.scale);
  put(src, "x.weight_scale_2", DType::kF32, {}, std::vector<float>{q.scale_2});
  return dequantize_linear(src, "x.weight", rows, cols);
}

TEST(WeightQuantizer, BlockFp8ScalesByBlockAmaxAndRoundsEachValueToItsNearestCode) {
  const int64_t rows = 130, cols = 260;  // partial blocks at both edges
  const auto w = sample_weight(rows, cols, 1);
  const BlockFp8Weight q = quantize_block_fp8(w.data(), rows, cols, "x.weight");
  ASSERT_EQ(q.scale_inv.size(), 6u);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float s = q.scale_inv[size_t((r / 128) * 3 + c / 128)];
      const float x = w[size_t(r * cols + c)];
      ASSERT_EQ(q.values[size_t(r * cols + c)], e4m3_reference(double(x) / s)) << r << "," << c;
    }
  }
  float amax = 0.0f;  // block [0, 0]
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(w[size_t(r * cols + c)]));
  EXPECT_EQ(q.scale_inv[0], amax / 448.0f);
  const auto back = dequantized(q, rows, cols);
  for (size_t i = 0; i < w.size(); ++i)
    ASSERT_EQ(back[i],
              e4m3_to_f32(q.values[i]) * q.scale_inv[(i / cols / 128) * 3 + i % cols / 128]);
}

TEST(WeightQuantizer, Mxfp8TakesTheSmallestPowerOfTwoThatNeedsNoSaturation) {
  const int64_t rows = 4, cols = 96;
  auto w = sample_weight(rows, cols, 2);
  for (int64_t c = 32; c < 64; ++c) w[size_t(c)] = 0.0f;  // an all-zero block: scale 1
  w[size_t(cols)] = 448.0f;                               // amax exactly 448 * 2^0
  w[size_t(cols + 32)] = 448.0f * 1.0001f;                // just above: 2^1
  const Mxfp8Weight q = quantize_mxfp8(w.data(), rows, cols, "x.weight");
  EXPECT_EQ(q.scale[1], 127);
  EXPECT_EQ(q.scale[3], 127);
  EXPECT_EQ(q.scale[4], 128);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const int k = q.scale[size_t(r * 3 + b)] - 127;
      float amax = 0.0f;
      for (int64_t i = 0; i < 32; ++i)
        amax = std::max(amax, std::fabs(w[size_t(r * cols + b * 32 + i)]));
      if (amax > 0.0f) {
        EXPECT_LE(amax, std::ldexp(448.0, k));
        EXPECT_GT(amax, std::ldexp(448.0, k - 1));
      }
      for (int64_t i = 0; i < 32; ++i) {
        const size_t at = size_t(r * cols + b * 32 + i);
        ASSERT_EQ(q.values[at], e4m3_reference(std::ldexp(double(w[at]), -k))) << at;
      }
    }
  }
  const auto back = dequantized(q, rows, cols);
  for (int64_t c = 32; c < 64; ++c) EXPECT_EQ(back[size_t(c)], 0.0f);
  EXPECT_EQ(back[size_t(cols)], 448.0f);
}

TEST(WeightQuantizer, Nvfp4ScalesByTensorAndBlockAndRoundsEachValueToItsNearestCode) {
  const int64_t rows = 6, cols = 64;
  const auto w = sample_weight(rows, cols, 3);
  const Nvfp4Weight q = quantize_nvfp4(w.data(), rows, cols, "x.weight");
  float amax = 0.0f;
  for (float x : w) amax = std::max(amax, std::fabs(x));
  EXPECT_EQ(q.scale_2, amax / 2688.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 16; ++b) {
      float bmax = 0.0f;
      for (int64_t i = 0; i < 16; ++i)
        bmax = std::max(bmax, std::fabs(w[size_t(r * cols + b * 16 + i)]));
      const uint8_t sb = q.scale[size_t(r * 4 + b)];
      ASSERT_EQ(sb, e4m3_reference(double(bmax) / (6.0 * q.scale_2)));
      const double d = double(e4m3_to_f32(sb)) * q.scale_2;
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t c = b * 16 + i;
        const uint8_t byte = q.packed[size_t((r * cols + c) / 2)];
        const uint8_t code = c % 2 == 0 ? byte & 0xf : byte >> 4;
        ASSERT_EQ(code, d > 0 ? e2m1_reference(w[size_t(r * cols + c)] / d) : 0) << r << "," << c;
      }
    }
  }
  // round_trip_nvfp4 on one row computes what quantize + dequantize do.
  const auto back = dequantized(q, rows, cols);
  std::vector<float> row(w.begin(), w.begin() + cols);
  round_trip_nvfp4(row.data(), cols, q.scale_2);
  for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(row[size_t(c)], back[size_t(c)]) << c;
}

// Values that every format represents exactly (the block's largest at the top of its range, so
// the scales are reproduced) come back bit for bit, signs, zeros and subnormal codes included.
TEST(WeightQuantizer, RepresentableWeightsRoundTripExactly) {
  const int64_t rows = 128, cols = 128;
  std::mt19937 rng(11);
  std::vector<float> fp8(size_t(rows * cols)), mx(size_t(rows * cols)), nv(size_t(rows * cols));
  const float s = 0.0078125f, s2 = std::ldexp(1.0f, -12);
  for (int64_t i = 0; i < rows * cols; ++i) {
    const uint8_t code = uint8_t(rng() % 256);
    const float e = (code & 0x7f) == 0x7f ? 0.0f : e4m3_to_f32(code);  // no NaN
    fp8[size_t(i)] = e * s;
    mx[size_t(i)] = std::ldexp(e, int(i / 32 % 5) - 2);
    nv[size_t(i)] = e2m1_to_f32(uint8_t(rng() % 16)) * e4m3_to_f32(uint8_t(0x30 + i / 16 % 8)) * s2;
  }
  for (int64_t r = 0; r < rows; ++r) {
    fp8[size_t(r * cols)] = 448.0f * s;
    for (int64_t b = 0; b < cols / 32; ++b)
      mx[size_t(r * cols + b * 32)] = std::ldexp(448.0f, int((r * cols + b * 32) / 32 % 5) - 2);
    for (int64_t b = 0; b < cols / 16; ++b)
      nv[size_t(r * cols + b * 16)] =
          6.0f * e4m3_to_f32(uint8_t(0x30 + (r * cols + b * 16) / 16 % 8)) * s2;
  }
  nv[1] = 6.0f * 448.0f * s2;  // the tensor's amax: scale_2 comes back as s2
  nv[0] = 0.0f;
  const auto bq = quantize_block_fp8(fp8.data(), rows, cols, "x.weight");
  EXPECT_EQ(bq.scale_inv[0], s);
  EXPECT_EQ(dequantized(bq, rows, cols), fp8);
  EXPECT_EQ(dequantized(quantize_mxfp8(mx.data(), rows, cols, "x.weight"), rows, cols), mx);
  const auto nq = quantize_nvfp4(nv.data(), rows, cols, "x.weight");
  EXPECT_EQ(nq.scale_2, s2);
  const auto nv_back = dequantized(nq, rows, cols);
  for (size_t i = 16; i < nv.size(); ++i) ASSERT_EQ(nv_back[i], nv[i]) << i;  // block 0: amax 6*448
}

TEST(WeightQuantizer, AllZeroWeightsKeepScaleOneAndComeBackZero) {
  const std::vector<float> w(64 * 64, 0.0f);
  const auto b = quantize_block_fp8(w.data(), 64, 64, "z.weight");
  EXPECT_EQ(b.scale_inv, std::vector<float>{1.0f});
  const auto m = quantize_mxfp8(w.data(), 64, 64, "z.weight");
  EXPECT_EQ(m.scale[0], 127);
  const auto n = quantize_nvfp4(w.data(), 64, 64, "z.weight");
  EXPECT_EQ(n.scale_2, 1.0f);
  EXPECT_EQ(dequantized(b, 64, 64), w);
  EXPECT_EQ(dequantized(m, 64, 64), w);
  EXPECT_EQ(dequantized(n, 64, 64), w);
}

TEST(WeightQuantizer, RefusesNonFiniteValuesAndBlocklessShapesNamingTheTensor) {
  std::vector<float> w(4 * 32, 1.0f);
  w[size_t(2 * 32 + 5)] = std::nanf("");
  try {
    quantize_mxfp8(w.data(), 4, 32, "model.layers.0.mlp.up_proj.weight");
    FAIL() << "a NaN was quantized";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.up_proj.weight"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("[2, 5]"), std::string::npos) << e.what();
  }
  w[size_t(2 * 32 + 5)] = 1.0f;
  EXPECT_THROW(quantize_nvfp4(w.data(), 8, 24, "x.weight"), Error);  // 24 % 16 != 0
  EXPECT_THROW(quantize_mxfp8(w.data(), 8, 16, "x.weight"), Error);  // 16 % 32 != 0
}

}  // namespace
}  // namespace sparkglm
