// quantized_gemv (engine/backend/cuda/quantized_linear.h): decode GEMV over NVFP4, MXFP8 and
// FP8-block weights. Weights are quantized by the CPU quantizer (model/weight_quantizer.h) and
// dequantized by the CPU loader's dequantize_linear, the reference every check is made against:
//   - every weight the kernel uses has dequantize_linear's bits (one-hot x rows read single
//     weights out exactly);
//   - y is within the FP32 summation bound of the exact (double) product of the same BF16 x and
//     dequantized W;
//   - a row's output bits do not depend on the rows beside it (1, 3, 8 rows and a row alone
//     against the same rows among 32).
// Shapes: one production shape per format (glm-5.3-flash) and odd ones (few rows, cols a multiple
// of the format's block, FP8-block rows not a multiple of 128, one FP8-block shape with a partial
// 128-column block).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/quantized_linear.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/model/tensor_source.h"
#include "engine/model/weight_formats.h"
#include "engine/model/weight_quantizer.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda::QuantFormat;
using namespace cuda_test;

struct Shape {
  QuantFormat format;
  int64_t rows, cols;
};

std::string describe(const Shape& s) {
  return std::string(cuda::quant_format_name(s.format)) + " [" + std::to_string(s.rows) + ", " +
         std::to_string(s.cols) + "]";
}

const Shape kShapes[] = {
    {QuantFormat::kNvfp4, 2048, 4096},     // a routed expert's gate or up projection
    {QuantFormat::kNvfp4, 37, 272},        // 17 scale blocks a row
    {QuantFormat::kMxfp8, 4096, 4096},     // a KDA q / k / v projection
    {QuantFormat::kMxfp8, 45, 352},        // 11 scale blocks a row
    {QuantFormat::kFp8Block, 1536, 4096},  // MLA q_a_proj
    {QuantFormat::kFp8Block, 200, 384},    // rows not a multiple of 128
    {QuantFormat::kFp8Block, 131, 272},    // a partial 128 x 128 block in both directions
};

template <typename T>
void put(OwnedTensors& src, const std::string& name, DType dtype, std::vector<int64_t> shape,
         const std::vector<T>& values) {
  std::memcpy(src.add(name, dtype, std::move(shape)), values.data(), values.size() * sizeof(T));
}

// A quantized weight on the host and the device, with its CPU dequantization.
struct Weight {
  Shape shape;
  std::vector<float> dense;  // dequantize_linear's FP32 [rows, cols]
  std::vector<uint8_t> data, scale;
  std::vector<float> scale_inv;
  float global_scale = 1.0f;
  cuda::DeviceBuffer d_data, d_scale, d_scale_inv;

  cuda::QuantizedWeight device() const {
    cuda::QuantizedWeight w;
    w.format = shape.format;
    w.rows = shape.rows;
    w.cols = shape.cols;
    w.data = static_cast<const uint8_t*>(d_data.data());
    if (!scale.empty()) w.scale = static_cast<const uint8_t*>(d_scale.data());
    if (!scale_inv.empty()) w.scale_inv = static_cast<const float*>(d_scale_inv.data());
    w.global_scale = global_scale;
    return w;
  }
};

// Random weights whose magnitude varies by row and by 64-column stretch (so block scales differ
// from block to block), with one all-zero stretch per row (a zero block takes scale 1).
std::vector<float> source_weights(const Shape& s) {
  auto w =
      uniform(0x9e3779b9u + uint64_t(s.rows * 31 + s.cols), size_t(s.rows * s.cols), 0.0f, 1.0f);
  for (int64_t r = 0; r < s.rows; ++r) {
    for (int64_t c = 0; c < s.cols; ++c) {
      const int64_t stretch = c / 64;
      const float mag =
          std::ldexp(1.0f, -int((r * 7 + stretch * 3) % 11)) / std::sqrt(float(s.cols));
      float& v = w[size_t(r * s.cols + c)];
      v = stretch == r % (s.cols / 64 + 1) ? 0.0f : v * mag;
    }
  }
  return w;
}

std::unique_ptr<Weight> make_weight(const Shape& s) {
  auto w = std::make_unique<Weight>();
  w->shape = s;
  const auto src_w = source_weights(s);
  OwnedTensors src("quantized_linear_cuda_test");
  const std::string name = "x.weight";
  if (s.format == QuantFormat::kNvfp4) {
    Nvfp4Weight q = quantize_nvfp4(src_w.data(), s.rows, s.cols, name);
    put(src, name, DType::kU8, {s.rows, s.cols / 2}, q.packed);
    put(src, "x.weight_scale", DType::kF8E4M3, {s.rows, s.cols / 16}, q.scale);
    put(src, "x.weight_scale_2", DType::kF32, {}, std::vector<float>{q.scale_2});
    w->data = std::move(q.packed);
    w->scale = std::move(q.scale);
    w->global_scale = q.scale_2;
  } else if (s.format == QuantFormat::kMxfp8) {
    Mxfp8Weight q = quantize_mxfp8(src_w.data(), s.rows, s.cols, name);
    put(src, name, DType::kF8E4M3, {s.rows, s.cols}, q.values);
    put(src, "x.weight_scale", DType::kF8E8M0, {s.rows, s.cols / 32}, q.scale);
    w->data = std::move(q.values);
    w->scale = std::move(q.scale);
  } else {
    BlockFp8Weight q = quantize_block_fp8(src_w.data(), s.rows, s.cols, name);
    put(src, name, DType::kF8E4M3, {s.rows, s.cols}, q.values);
    put(src, "x.weight_scale_inv", DType::kF32, {(s.rows + 127) / 128, (s.cols + 127) / 128},
        q.scale_inv);
    w->data = std::move(q.values);
    w->scale_inv = std::move(q.scale_inv);
  }
  w->dense = dequantize_linear(src, name, s.rows, s.cols);
  w->d_data = to_device(w->data);
  if (!w->scale.empty()) w->d_scale = to_device(w->scale);
  if (!w->scale_inv.empty()) w->d_scale_inv = to_device(w->scale_inv);
  return w;
}

// BF16 activations of order one, -0 among them.
std::vector<uint16_t> activations(int64_t m, int64_t k) {
  const auto f = uniform(0xa11ce + uint64_t(k), size_t(m * k), 0.0f, 1.0f);
  std::vector<uint16_t> x(f.size());
  for (size_t i = 0; i < f.size(); ++i) x[i] = f32_to_bf16(f[i]);
  x[0] = 0x8000u;
  return x;
}

std::vector<float> run(const Weight& w, const cuda::DeviceBuffer& x, int64_t m) {
  cuda::DeviceBuffer y(size_t(m * w.shape.rows) * 4);
  SPARKGLM_CUDA_CHECK(cudaMemset(y.data(), 0xff, y.bytes()));  // NaN: every output must be written
  cuda::quantized_gemv(static_cast<const uint16_t*>(x.data()), m, w.device(),
                       static_cast<float*>(y.data()), nullptr);
  return to_host<float>(y, size_t(m * w.shape.rows));
}

TEST(CudaQuantizedGemv, UsesEveryWeightWithTheCpuDequantizedBits) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const Shape& s : kShapes) {
    const auto w = make_weight(s);
    // 32 one-hot rows a call: y[i][o] = w[o][c_i] exactly (the other terms are signed zeros).
    // Odd shapes: every column; production shapes: 64 columns covering every lane and position
    // of a chunk.
    std::vector<int64_t> cols;
    if (s.cols <= 512) {
      for (int64_t c = 0; c < s.cols; ++c) cols.push_back(c);
    } else {
      for (int64_t i = 0; i < 64; ++i) cols.push_back((i * 16 + i % 16 + (i / 32) * 613) % s.cols);
    }
    for (size_t base = 0; base < cols.size(); base += 32) {
      const int64_t m = int64_t(std::min<size_t>(32, cols.size() - base));
      std::vector<uint16_t> x(size_t(m * s.cols), 0);
      for (int64_t i = 0; i < m; ++i) x[size_t(i * s.cols + cols[base + size_t(i)])] = 0x3f80u;
      const auto dx = to_device(x);
      const auto y = run(*w, dx, m);
      size_t bad = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t o = 0; o < s.rows; ++o) {
          const float want = w->dense[size_t(o * s.cols + cols[base + size_t(i)])];
          bad += !(y[size_t(i * s.rows + o)] == want);  // +0 and -0 both read back as a zero
        }
      EXPECT_EQ(bad, 0u) << describe(s) << " columns from " << cols[base];
    }
  }
}

TEST(CudaQuantizedGemv, EqualsTheExactProductWithinTheFp32SummationBound) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const Shape& s : kShapes) {
    const auto w = make_weight(s);
    const auto x = activations(32, s.cols);
    const auto dx = to_device(x);
    std::vector<float> xf(x.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = bf16_to_f32(x[i]);
    // Each output is one FP32 chain per lane (16 FMAs for each of its ceil(cols / 512) chunks,
    // exact products, one rounding each) and 5 additions of the lane sums: no term passes through
    // more than L = 16 ceil(cols / 512) + 5 roundings, so |y - exact| <= gamma_L sum |x w| with
    // gamma_L = L u / (1 - L u), u = 2^-24 (Higham, Accuracy and Stability, 4.2). The exact value
    // is the double sum (its own error, ~1e-16 relative, is far inside the bound). A wrong scale,
    // nibble or column breaks it by orders of magnitude.
    const double L = double(16 * ((s.cols + 511) / 512) + 5), u = std::ldexp(1.0, -24);
    const double gamma = L * u / (1 - L * u);
    for (int64_t m : {1, 3, 8, 32}) {
      const auto y = run(*w, dx, m);
      size_t bad = 0;
      double worst = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t o = 0; o < s.rows; ++o) {
          double exact = 0, mag = 0;
          const float* wr = w->dense.data() + o * s.cols;
          const float* xr = xf.data() + i * s.cols;
          for (int64_t c = 0; c < s.cols; ++c) {
            exact += double(xr[c]) * double(wr[c]);
            mag += std::fabs(double(xr[c]) * double(wr[c]));
          }
          const double err = std::fabs(double(y[size_t(i * s.rows + o)]) - exact);
          const double bound = gamma * mag * 1.0001 + 1e-300;
          worst = std::max(worst, err / bound);
          bad += !(err <= bound);  // NaN (an unwritten output) counts
        }
      EXPECT_EQ(bad, 0u) << describe(s) << " m " << m << " worst error / bound " << worst;
    }
  }
}

TEST(CudaQuantizedGemv, ARowsBitsDoNotDependOnTheRowsBesideIt) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const Shape& s : kShapes) {
    const auto w = make_weight(s);
    const auto x = activations(32, s.cols);
    const auto dx = to_device(x);
    const auto wide = run(*w, dx, 32);
    for (int64_t m : {1, 3, 8}) {
      const auto y = run(*w, dx, m);
      EXPECT_EQ(std::memcmp(y.data(), wide.data(), y.size() * 4), 0)
          << describe(s) << ": the first " << m << " rows differ from the same rows among 32";
    }
    for (int64_t r : {0, 5, 17, 31}) {  // row r alone
      const std::vector<uint16_t> one(x.begin() + r * s.cols, x.begin() + (r + 1) * s.cols);
      const auto d_one = to_device(one);
      const auto y = run(*w, d_one, 1);
      EXPECT_EQ(std::memcmp(y.data(), wide.data() + r * s.rows, y.size() * 4), 0)
          << describe(s) << ": row " << r << " alone differs from row " << r << " among 32";
    }
  }
}

TEST(CudaQuantizedGemv, RefusesWhatItCannotRun) {
  // Checked on the host before any launch, so this runs without a device.
  alignas(16) static const uint8_t bytes[64] = {};
  static const float scale_inv[1] = {1.0f};
  cuda::QuantizedWeight w;
  w.rows = 4;
  w.cols = 48;  // a multiple of 16, not of 32
  w.data = bytes;
  w.scale = bytes;
  w.format = QuantFormat::kMxfp8;
  EXPECT_NE(std::string(cuda::quantized_weight_problem(w)), "");
  w.format = QuantFormat::kNvfp4;
  EXPECT_EQ(std::string(cuda::quantized_weight_problem(w)), "");
  w.data = bytes + 4;  // NVFP4 rows are read 8 bytes at a time
  EXPECT_NE(std::string(cuda::quantized_weight_problem(w)), "");
  w.data = bytes;
  w.format = QuantFormat::kFp8Block;
  EXPECT_NE(std::string(cuda::quantized_weight_problem(w)), "");  // no scale_inv
  w.scale_inv = scale_inv;
  EXPECT_EQ(std::string(cuda::quantized_weight_problem(w)), "");
  w.cols = 40;
  EXPECT_NE(std::string(cuda::quantized_weight_problem(w)), "");
  EXPECT_THROW(cuda::quantized_gemv(nullptr, 1, w, nullptr, nullptr), Error);
  w.cols = 48;
  alignas(16) static const uint16_t x[48] = {};
  EXPECT_THROW(cuda::quantized_gemv(x, 33, w, nullptr, nullptr), Error);  // not decode rows
}

TEST(CudaQuantizedGemv, CountsEachFormatsBytesPerWeight) {
  cuda::QuantizedWeight w;
  w.rows = 2048;
  w.cols = 4096;
  const double n = 2048.0 * 4096.0;
  w.format = QuantFormat::kNvfp4;
  EXPECT_EQ(w.bytes(), n * 0.5625 + 4);
  w.format = QuantFormat::kMxfp8;
  EXPECT_EQ(w.bytes(), n * 1.03125);
  w.format = QuantFormat::kFp8Block;
  EXPECT_EQ(w.bytes(), n + 4.0 * 16 * 32);
  w.rows = 200;  // partial blocks count whole
  EXPECT_EQ(w.bytes(), 200.0 * 4096 + 4.0 * 2 * 32);
}

}  // namespace
}  // namespace sparkglm
