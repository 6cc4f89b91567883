#include "engine/model/weight_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/core/dtype.h"
#include "engine/core/error.h"

namespace sparkglm {
namespace {

template <typename T>
void put(OwnedTensors& src, const std::string& name, DType dtype, std::vector<int64_t> shape,
         const std::vector<T>& values) {
  std::byte* p = src.add(name, dtype, std::move(shape));
  std::memcpy(p, values.data(), values.size() * sizeof(T));
}

testing::AssertionResult Mentions(const std::string& message, const std::string& part) {
  if (message.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << "message \"" << message << "\" does not mention \"" << part << "\"";
}

std::string dequant_error(const OwnedTensors& src, int64_t rows, int64_t cols) {
  try {
    dequantize_linear(src, "x.weight", rows, cols);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "dequantize_linear accepted the tensors";
  return "";
}

// A weight value exactly representable in E4M3: a multiple of 0.5 in [-3.5, 3.5].
float fp8_value(int64_t r, int64_t c) {
  return float((r * 3 + c * 5) % 15 - 7) * 0.5f;
}

std::vector<uint8_t> fp8_weight(int64_t rows, int64_t cols) {
  std::vector<uint8_t> q(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) q[size_t(r * cols + c)] = f32_to_e4m3(fp8_value(r, c));
  return q;
}

// E2M1 by its definition: sign bit 3, two exponent bits (bias 1), one mantissa bit.
float e2m1_reference(uint8_t code) {
  const int e = (code >> 1) & 3;
  const int m = code & 1;
  const float mag = e == 0 ? 0.5f * float(m) : std::ldexp(1.0f + 0.5f * float(m), e - 1);
  return (code & 8) ? -mag : mag;
}

uint8_t nvfp4_code(int64_t r, int64_t c) {
  return uint8_t((r * 7 + c * 3) % 16);
}

// An NVFP4 weight [rows, cols] with per-16 scales `scales` (exact in E4M3) beside it.
void put_nvfp4(OwnedTensors& src, int64_t rows, int64_t cols, const std::vector<float>& scales) {
  std::vector<uint8_t> packed(size_t(rows * cols / 2));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += 2)
      packed[size_t((r * cols + c) / 2)] = uint8_t(nvfp4_code(r, c) | (nvfp4_code(r, c + 1) << 4));
  put(src, "x.weight", DType::kU8, {rows, cols / 2}, packed);
  std::vector<uint8_t> s;
  for (float v : scales) s.push_back(f32_to_e4m3(v));
  put(src, "x.weight_scale", DType::kF8E4M3, {rows, cols / 16}, s);
}

TEST(WeightFormats, DenseFormatsConvertExactly) {
  OwnedTensors src("test");
  put(src, "f32.weight", DType::kF32, {2, 2}, std::vector<float>{1.25f, -3.0f, 1e-30f, 7.0f});
  put(src, "bf16.weight", DType::kBF16, {2, 2},
      std::vector<uint16_t>{0x3fc0, 0xc000, 0x3e20, 0x0001});
  put(src, "f16.weight", DType::kF16, {2, 2},
      std::vector<uint16_t>{0x3c00, 0xb800, 0x7bff, 0x0001});
  EXPECT_EQ(dequantize_linear(src, "f32.weight", 2, 2),
            (std::vector<float>{1.25f, -3.0f, 1e-30f, 7.0f}));
  EXPECT_EQ(dequantize_linear(src, "bf16.weight", 2, 2),
            (std::vector<float>{1.5f, -2.0f, 0.15625f, std::ldexp(1.0f, -133)}));
  EXPECT_EQ(dequantize_linear(src, "f16.weight", 2, 2),
            (std::vector<float>{1.0f, -0.5f, 65504.0f, std::ldexp(1.0f, -24)}));
}

TEST(WeightFormats, BlockFp8ScalesEach128By128Block) {
  const int64_t rows = 130, cols = 260;  // partial blocks at both edges: scales [2, 3]
  const std::vector<float> scales = {0.5f, 2.0f, 0.25f, 3.0f, 1.5f, 0.1f};
  OwnedTensors src("test");
  put(src, "x.weight", DType::kF8E4M3, {rows, cols}, fp8_weight(rows, cols));
  put(src, "x.weight_scale_inv", DType::kF32, {2, 3}, scales);
  const auto out = dequantize_linear(src, "x.weight", rows, cols);
  ASSERT_EQ(out.size(), size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float want = fp8_value(r, c) * scales[size_t((r / 128) * 3 + c / 128)];
      ASSERT_EQ(out[size_t(r * cols + c)], want) << "at [" << r << ", " << c << "]";
    }
  }
}

TEST(WeightFormats, Mxfp8ScalesEach32ValuesOfARowByAPowerOfTwo) {
  const int64_t rows = 3, cols = 64;
  const std::vector<uint8_t> exps = {127, 130, 120, 0, 254, 128};  // [3, 2]
  for (DType scale_dtype : {DType::kF8E8M0, DType::kU8}) {
    OwnedTensors src("test");
    put(src, "x.weight", DType::kF8E4M3, {rows, cols}, fp8_weight(rows, cols));
    put(src, "x.weight_scale", scale_dtype, {rows, cols / 32}, exps);
    const auto out = dequantize_linear(src, "x.weight", rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int e = exps[size_t(r * 2 + c / 32)];
        const float want = fp8_value(r, c) * std::ldexp(1.0f, e - 127);
        ASSERT_EQ(out[size_t(r * cols + c)], want) << "at [" << r << ", " << c << "]";
      }
    }
  }
}

TEST(WeightFormats, Nvfp4UnpacksLowNibbleFirstAndAppliesBothScales) {
  const int64_t rows = 2, cols = 32;
  const std::vector<float> scales = {0.5f, 1.5f, 448.0f, 0.015625f};  // [2, 2]
  const float global = 0.1f;
  OwnedTensors src("test");
  put_nvfp4(src, rows, cols, scales);
  put(src, "x.weight_scale_2", DType::kF32, {}, std::vector<float>{global});
  const auto out = dequantize_linear(src, "x.weight", rows, cols);
  // Column 0 of row 0 is code 0 (+0) and column 1 is code 3 (1.5): the low nibble comes first.
  EXPECT_EQ(out[1], 1.5f * 0.5f * global);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float want =
          (e2m1_reference(nvfp4_code(r, c)) * scales[size_t(r * 2 + c / 16)]) * global;
      ASSERT_EQ(out[size_t(r * cols + c)], want) << "at [" << r << ", " << c << "]";
    }
  }
}

TEST(WeightFormats, Nvfp4AcceptsAOneElementGlobalScaleAndAnInputScale) {
  OwnedTensors src("test");
  put_nvfp4(src, 1, 16, {2.0f});
  put(src, "x.weight_scale_2", DType::kF32, {1}, std::vector<float>{4.0f});
  put(src, "x.input_scale", DType::kF32, {1}, std::vector<float>{100.0f});
  const auto out = dequantize_linear(src, "x.weight", 1, 16);
  for (int64_t c = 0; c < 16; ++c)
    EXPECT_EQ(out[size_t(c)], e2m1_reference(nvfp4_code(0, c)) * 8.0f);
}

TEST(WeightFormats, BlockFp8ScaleOfTheWrongShapeOrDtypeIsRejected) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kF8E4M3, {130, 260}, fp8_weight(130, 260));
  put(src, "x.weight_scale_inv", DType::kF32, {1, 3}, std::vector<float>(3, 1.0f));
  const std::string msg = dequant_error(src, 130, 260);
  EXPECT_TRUE(Mentions(msg, "tensor 'x.weight_scale_inv' is F32 [1, 3]; expected F32 [2, 3]"));
  OwnedTensors bf16("test");
  put(bf16, "x.weight", DType::kF8E4M3, {2, 2}, fp8_weight(2, 2));
  put(bf16, "x.weight_scale_inv", DType::kBF16, {1, 1}, std::vector<uint16_t>{0x3f80});
  EXPECT_TRUE(Mentions(dequant_error(bf16, 2, 2), "is BF16 [1, 1]; expected F32 [1, 1]"));
}

TEST(WeightFormats, Mxfp8ScaleOfTheWrongShapeIsRejected) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kF8E4M3, {3, 64}, fp8_weight(3, 64));
  put(src, "x.weight_scale", DType::kF8E8M0, {3, 1}, std::vector<uint8_t>(3, 127));
  EXPECT_TRUE(Mentions(dequant_error(src, 3, 64), "expected F8_E8M0 or U8 [3, 2]"));
}

TEST(WeightFormats, Nvfp4WithoutAValidGlobalScaleIsRejected) {
  OwnedTensors missing("test");
  put_nvfp4(missing, 2, 32, {1, 1, 1, 1});
  EXPECT_TRUE(Mentions(dequant_error(missing, 2, 32), "needs 'x.weight_scale_2'"));
  OwnedTensors vector("test");
  put_nvfp4(vector, 2, 32, {1, 1, 1, 1});
  put(vector, "x.weight_scale_2", DType::kF32, {2}, std::vector<float>{1, 1});
  EXPECT_TRUE(Mentions(dequant_error(vector, 2, 32),
                       "tensor 'x.weight_scale_2' is F32 [2]; expected F32 [] or [1]"));
}

TEST(WeightFormats, Nvfp4ScaleOfTheWrongDtypeIsRejected) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kU8, {2, 16}, std::vector<uint8_t>(32, 0));
  put(src, "x.weight_scale", DType::kF32, {2, 2}, std::vector<float>(4, 1.0f));
  put(src, "x.weight_scale_2", DType::kF32, {}, std::vector<float>{1});
  EXPECT_TRUE(Mentions(dequant_error(src, 2, 32), "is F32 [2, 2]; expected F8_E4M3 [2, 2]"));
}

TEST(WeightFormats, WeightOfTheWrongShapeIsRejected) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kBF16, {3, 2}, std::vector<uint16_t>(6, 0));
  EXPECT_TRUE(
      Mentions(dequant_error(src, 2, 3), "tensor 'x.weight' is BF16 [3, 2]; expected [2, 3]"));
  OwnedTensors nvfp4("test");
  put_nvfp4(nvfp4, 2, 32, {1, 1, 1, 1});
  put(nvfp4, "x.weight_scale_2", DType::kF32, {}, std::vector<float>{1});
  EXPECT_TRUE(Mentions(dequant_error(nvfp4, 2, 48), "is U8 [2, 16]; expected [2, 24]"));
}

TEST(WeightFormats, Fp8WithoutExactlyOneScaleIsRejected) {
  OwnedTensors none("test");
  put(none, "x.weight", DType::kF8E4M3, {2, 32}, fp8_weight(2, 32));
  EXPECT_TRUE(Mentions(dequant_error(none, 2, 32), "has neither 'x.weight_scale_inv'"));
  OwnedTensors both("test");
  put(both, "x.weight", DType::kF8E4M3, {2, 32}, fp8_weight(2, 32));
  put(both, "x.weight_scale_inv", DType::kF32, {1, 1}, std::vector<float>{1});
  put(both, "x.weight_scale", DType::kF8E8M0, {2, 1}, std::vector<uint8_t>{127, 127});
  EXPECT_TRUE(Mentions(dequant_error(both, 2, 32), "has both"));
}

TEST(WeightFormats, ScaleBesideADenseWeightIsRejected) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kBF16, {1, 2}, std::vector<uint16_t>{0x3f80, 0x3f80});
  put(src, "x.weight_scale_inv", DType::kF32, {1, 1}, std::vector<float>{2});
  EXPECT_TRUE(Mentions(dequant_error(src, 1, 2),
                       "'x.weight_scale_inv' accompanies 'x.weight', which is stored as BF16"));
}

TEST(WeightFormats, UnsupportedOrMissingWeightIsRejected) {
  OwnedTensors src("test");
  put(src, "x.weight", DType::kI32, {1, 2}, std::vector<int32_t>{1, 2});
  EXPECT_TRUE(
      Mentions(dequant_error(src, 1, 2), "tensor 'x.weight' is I32 [1, 2]; a projection is"));
  OwnedTensors empty("test");
  EXPECT_TRUE(Mentions(dequant_error(empty, 1, 2), "tensor 'x.weight' is missing"));
}

TEST(WeightFormats, AuxiliaryNamesAreTheScaleSuffixesOnly) {
  for (const char* name : {"a.q_proj.weight_scale_inv", "a.q_proj.weight_scale", "a.weight_scale_2",
                           "a.input_scale"}) {
    EXPECT_TRUE(is_auxiliary_tensor_name(name)) << name;
  }
  for (const char* name : {"a.q_proj.weight", "model.layers.0.hc_attn_scale", "model.hc_head_scale",
                           "a.weight_scale_3", "weight_scale"}) {
    EXPECT_FALSE(is_auxiliary_tensor_name(name)) << name;
  }
}

}  // namespace
}  // namespace sparkglm
