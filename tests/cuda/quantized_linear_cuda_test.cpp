// quantized_gemv (engine/backend/cuda/quantized_linear.h): decode GEMV over NVFP4, MXFP8 and
// FP8-block weights. Weights are quantized by the CPU quantizer (model/weight_quantizer.h) and
// dequantized by the CPU loader's dequantize_linear, the reference every check is made against:
//   - every weight the kernel uses has dequantize_linear's bits (one-hot x rows read single
//     weights out exactly);
//   - y is within the FP32 summation bound of the exact (double) product of the same BF16 x and
//     dequantized W;
//   - a row's output bits do not depend on the rows beside it (1, 3, 8, 12, 20 rows and a row
//     alone against the same rows among 32);
//   - every E4M3 code (values and NVFP4 block scales) and every E2M1 nibble dequantizes exactly,
//     and MXFP8 scale codes near 0 and 254 give the CPU's bits (the kernel applies them in FP32).
// Shapes: one production shape per format (glm-5.3-flash) and odd ones (1 or 4 rows as the
// runner's gates, rows not a multiple of 16, cols from 272 to 16384, cols a multiple of 16 but
// not of 32, FP8-block rows not a multiple of 128 and a partial 128-column block), and weights of
// few 16-row tiles, whose k is split over blocks when room for the partial sums is lent (every
// check runs with it lent; the bound and the baseline's bits also without).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
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
    {QuantFormat::kMxfp8, 1, 4096},        // one output row (a pooling gate)
    {QuantFormat::kMxfp8, 4, 16384},       // 4 rows, a long k split over 8 warps
    {QuantFormat::kNvfp4, 1, 2048},
    {QuantFormat::kNvfp4, 4, 16384},
    {QuantFormat::kNvfp4, 24, 512},  // rows 16 + 8
    {QuantFormat::kFp8Block, 1, 512},
    {QuantFormat::kFp8Block, 20, 7168},  // 56 column blocks over 8 warps
    // Few 16-row tiles: with room lent, k is split over blocks (KDA's low-rank f_a / g_a, 8
    // tiles; its b_proj, 4 tiles; a shared expert's slice).
    {QuantFormat::kMxfp8, 128, 4096},
    {QuantFormat::kMxfp8, 64, 4096},
    // 66 tiles (no split over blocks), 9 groups a warp: a full stage, then a partial one, and the
    // warps' MXFP8 scale rows not 8-byte aligned (the stream path's byte-wise scale loads).
    {QuantFormat::kMxfp8, 1056, 2304},
    {QuantFormat::kNvfp4, 1056, 2304},
    {QuantFormat::kNvfp4, 128, 4096},
    {QuantFormat::kFp8Block, 128, 4096},
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

// A weight given by its stored bytes (codes chosen by the test), with its CPU dequantization.
std::unique_ptr<Weight> raw_weight(const Shape& s, std::vector<uint8_t> data,
                                   std::vector<uint8_t> scale, std::vector<float> scale_inv,
                                   float global_scale) {
  auto w = std::make_unique<Weight>();
  w->shape = s;
  OwnedTensors src("quantized_linear_cuda_test");
  const std::string name = "x.weight";
  if (s.format == QuantFormat::kNvfp4) {
    put(src, name, DType::kU8, {s.rows, s.cols / 2}, data);
    put(src, "x.weight_scale", DType::kF8E4M3, {s.rows, s.cols / 16}, scale);
    put(src, "x.weight_scale_2", DType::kF32, {}, std::vector<float>{global_scale});
  } else if (s.format == QuantFormat::kMxfp8) {
    put(src, name, DType::kF8E4M3, {s.rows, s.cols}, data);
    put(src, "x.weight_scale", DType::kF8E8M0, {s.rows, s.cols / 32}, scale);
  } else {
    put(src, name, DType::kF8E4M3, {s.rows, s.cols}, data);
    put(src, "x.weight_scale_inv", DType::kF32, {(s.rows + 127) / 128, (s.cols + 127) / 128},
        scale_inv);
  }
  w->dense = dequantize_linear(src, name, s.rows, s.cols);
  w->data = std::move(data);
  w->scale = std::move(scale);
  w->scale_inv = std::move(scale_inv);
  w->global_scale = global_scale;
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

// Room for the partial sums of k split over blocks, as much as Gemm lends (16 MiB): weights of
// few 16-row tiles take that split when it is lent (quantized_linear.h).
const cuda::DeviceBuffer& partial_room() {
  static const cuda::DeviceBuffer room(size_t(16) << 20);
  return room;
}

enum class Split { kLent, kNone };

std::vector<float> run(const Weight& w, const cuda::DeviceBuffer& x, int64_t m,
                       cuda::QuantKernel kernel = cuda::QuantKernel::kCurrent,
                       Split split = Split::kLent) {
  cuda::DeviceBuffer y(size_t(m * w.shape.rows) * 4);
  SPARKGLM_CUDA_CHECK(cudaMemset(y.data(), 0xff, y.bytes()));  // NaN: every output must be written
  cuda::GemvPartials partials;
  if (split == Split::kLent) {
    SPARKGLM_CUDA_CHECK(cudaMemset(partial_room().data(), 0xff, partial_room().bytes()));
    partials = {static_cast<float*>(partial_room().data()), partial_room().bytes() / 4};
  }
  cuda::quantized_gemv(static_cast<const uint16_t*>(x.data()), m, w.device(),
                       static_cast<float*>(y.data()), nullptr, kernel, partials);
  return to_host<float>(y, size_t(m * w.shape.rows));
}

// 32 one-hot rows a call: y[i][o] = w[o][c_i] exactly (the other terms are signed zeros). Up to
// 512 columns: every column; wider: 64 columns spread over k (every warp's range) whose
// positions in a 32-column group take all 32 values (every lane and fragment slot).
void expect_one_hot_exact(const Weight* w) {
  const Shape& s = w->shape;
  std::vector<int64_t> cols;
  if (s.cols <= 512) {
    for (int64_t c = 0; c < s.cols; ++c) cols.push_back(c);
  } else {
    for (int64_t i = 0; i < 64; ++i) cols.push_back((i * (s.cols / 64) + (i * 7) % 32) % s.cols);
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

TEST(CudaQuantizedGemv, UsesEveryWeightWithTheCpuDequantizedBits) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const Shape& s : kShapes) expect_one_hot_exact(make_weight(s).get());
}

// Every stored code through the kernel's converters: each E4M3 value code (subnormals, both
// signs; the NaN codes 0x7f / 0xff excepted: the kernel does not special-case them) and, for
// NVFP4, every E2M1 nibble under every non-NaN E4M3 block scale.
TEST(CudaQuantizedGemv, DequantizesEveryCodeExactly) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  auto no_nan = [](uint32_t code) { return (code & 0x7fu) == 0x7fu ? uint8_t(0) : uint8_t(code); };
  {
    const Shape s{QuantFormat::kFp8Block, 16, 256};
    std::vector<uint8_t> data(size_t(s.rows * s.cols));
    for (size_t i = 0; i < data.size(); ++i) data[i] = no_nan(uint32_t(i * 37 + i / 256));
    expect_one_hot_exact(raw_weight(s, data, {}, {0.75f, -3.0f}, 1.0f).get());
  }
  {
    const Shape s{QuantFormat::kMxfp8, 16, 256};
    std::vector<uint8_t> data(size_t(s.rows * s.cols));
    for (size_t i = 0; i < data.size(); ++i) data[i] = no_nan(uint32_t(i * 37 + i / 256));
    std::vector<uint8_t> scale(size_t(s.rows * s.cols / 32));
    for (size_t i = 0; i < scale.size(); ++i) scale[i] = uint8_t(100 + i % 40);
    expect_one_hot_exact(raw_weight(s, data, scale, {}, 1.0f).get());
  }
  {
    // 16 rows x 16 blocks: block (r, b) takes scale code 16 r + b; its 16 nibbles are 0 .. 15
    // rotated by the row.
    const Shape s{QuantFormat::kNvfp4, 16, 256};
    std::vector<uint8_t> data(size_t(s.rows * s.cols / 2)), scale(size_t(s.rows * s.cols / 16));
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c = 0; c < s.cols; c += 2) {
        const uint32_t lo = uint32_t(c + r) % 16, hi = uint32_t(c + 1 + r) % 16;
        data[size_t((r * s.cols + c) / 2)] = uint8_t(lo | (hi << 4));
      }
    for (size_t i = 0; i < scale.size(); ++i) scale[i] = no_nan(uint32_t(i));
    expect_one_hot_exact(raw_weight(s, data, scale, {}, 0.3f).get());
  }
}

// MXFP8 scales at the ends of E8M0's range: 2^-127 (an FP32 subnormal) and 2^-126 .. 2^-125
// scale E4M3 values into FP32 subnormals, 2^126 .. 2^127 overflow the largest ones to infinity;
// the CPU rounds each product once, and so does the kernel's FP32 FMA of the group sum.
TEST(CudaQuantizedGemv, Mxfp8ExtremeScalesMatchTheCpu) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Shape s{QuantFormat::kMxfp8, 20, 512};
  std::vector<uint8_t> data(size_t(s.rows * s.cols));
  for (size_t i = 0; i < data.size(); ++i) {
    const uint32_t code = uint32_t(i * 53 + 11) & 0xffu;
    data[i] = (code & 0x7fu) == 0x7fu ? uint8_t(0x7e) : uint8_t(code);
  }
  const uint8_t codes[] = {0, 1, 2, 3, 10, 127, 200, 252, 253, 254};
  std::vector<uint8_t> scale(size_t(s.rows * s.cols / 32));
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = codes[i % sizeof(codes)];
  expect_one_hot_exact(raw_weight(s, data, scale, {}, 1.0f).get());
}

TEST(CudaQuantizedGemv, EqualsTheExactProductWithinTheFp32SummationBound) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const Shape& s : kShapes) {
    const auto w = make_weight(s);
    const auto x = activations(32, s.cols);
    const auto dx = to_device(x);
    std::vector<float> xf(x.size());
    for (size_t i = 0; i < x.size(); ++i) xf[i] = bf16_to_f32(x[i]);
    // Each output is a chain of MMAs (exact products; the tensor core may align its addends to
    // the largest and truncate: counted as two roundings of 2^-23 a step) over at most
    // ceil(cols / 16) steps, at most ceil(cols / 32) scale FMAs, up to 63 additions of the warp
    // and block sums (8 warps, or 4 warps in each of up to 16 blocks) and one global-scale
    // product: no term passes through more than L = 3 ceil(cols / 16) + 80 roundings of
    // relative size u = 2^-23, so
    // |y - exact| <= gamma_L sum |x w| with gamma_L = L u / (1 - L u) (Higham, Accuracy and
    // Stability, 4.2). The exact value is the double sum (its own error, ~1e-16 relative, is far
    // inside the bound). A wrong scale or column breaks it by orders of magnitude; the one-hot
    // test checks every weight's bits.
    const double L = double(3 * ((s.cols + 15) / 16) + 80), u = std::ldexp(1.0, -23);
    const double gamma = L * u / (1 - L * u);
    for (const auto& [m, split] :
         {std::pair{1, Split::kLent}, std::pair{3, Split::kLent}, std::pair{8, Split::kLent},
          std::pair{32, Split::kLent}, std::pair{1, Split::kNone}, std::pair{32, Split::kNone}}) {
      const auto y = run(*w, dx, m, cuda::QuantKernel::kCurrent, split);
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
      EXPECT_EQ(bad, 0u) << describe(s) << " m " << m
                         << (split == Split::kLent ? " (split room lent)" : " (no split room)")
                         << " worst error / bound " << worst;
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
    for (int64_t m : {1, 3, 8, 12, 20}) {  // 1, 2 and 3 tiles of 8 B columns against 4
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

// The current kernel against the 2026-12-02 baseline (QuantKernel::kBaseline, kept for one
// release as the G1 peer): the current one streams each warp's rows through shared memory
// (cp.async), NVFP4 decodes through the E2M1 pair table and a BF16x2 scale product, and it runs
// 3 blocks an SM at 1-8 rows: the same values in the same MMA order, so the same bits at every
// shape and row count, with and without k split over blocks (the same plan for both).
TEST(CudaQuantizedGemv, CurrentKernelMatchesTheBaselineBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const Shape& s : kShapes) {
    const auto w = make_weight(s);
    const auto x = activations(32, s.cols);
    const auto dx = to_device(x);
    for (Split split : {Split::kLent, Split::kNone})
      for (int64_t m : {1, 4, 8, 32}) {
        const auto now = run(*w, dx, m, cuda::QuantKernel::kCurrent, split);
        const auto base = run(*w, dx, m, cuda::QuantKernel::kBaseline, split);
        EXPECT_EQ(std::memcmp(now.data(), base.data(), now.size() * 4), 0)
            << describe(s) << " m " << m << (split == Split::kLent ? " (split lent)" : "");
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
