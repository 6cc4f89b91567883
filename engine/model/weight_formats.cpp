#include "engine/model/weight_formats.h"

#include <array>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>

#include "engine/core/dtype.h"
#include "engine/core/error.h"

namespace sparkglm {
namespace {

constexpr const char* kScaleInvSuffix = ".weight_scale_inv";
constexpr const char* kScaleSuffix = ".weight_scale";
constexpr const char* kScale2Suffix = ".weight_scale_2";
constexpr const char* kInputScaleSuffix = ".input_scale";
constexpr int64_t kFp8Block = 128;  // block FP8: one scale per 128x128 block
constexpr int64_t kMxBlock = 32;    // MXFP8: one scale per 32 values of a row
constexpr int64_t kNvBlock = 16;    // NVFP4: one scale per 16 values of a row

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorKind::kInvalidCheckpoint, what);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string described(const TensorView& t) {
  return std::string(dtype_name(t.dtype)) + " " + shape_string(t.shape);
}

// One tensor that sits beside the weight: its name and, when present, its view.
struct Beside {
  std::string name;
  std::optional<TensorView> view;
};

void expect(const Beside& b, std::initializer_list<DType> dtypes, const std::vector<int64_t>& shape,
            const std::string& why) {
  bool dtype_ok = false;
  std::string names;
  for (DType d : dtypes) {
    dtype_ok = dtype_ok || b.view->dtype == d;
    names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
  }
  if (!dtype_ok || b.view->shape != shape) {
    invalid("tensor '" + b.name + "' is " + described(*b.view) + "; expected " + names + " " +
            shape_string(shape) + " (" + why + ")");
  }
}

// A per-tensor FP32 scale is stored either as a 0-d tensor or as [1].
float scalar_f32(const Beside& b, const std::string& why) {
  const TensorView& t = *b.view;
  if (t.dtype != DType::kF32 || t.numel() != 1 || t.shape.size() > 1) {
    invalid("tensor '" + b.name + "' is " + described(t) + "; expected F32 [] or [1] (" + why +
            ")");
  }
  float v;
  std::memcpy(&v, t.data, sizeof(v));
  return v;
}

// Tensors of a format the weight is not stored in would be ignored silently, so they are errors.
void refuse(const Beside& b, const std::string& weight_name, const std::string& format) {
  if (b.view) {
    invalid("tensor '" + b.name + "' accompanies '" + weight_name + "', which is stored as " +
            format + " and takes no such tensor");
  }
}

template <typename T>
T load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * int64_t(sizeof(T)), sizeof(T));  // views need not be aligned
  return v;
}

std::array<float, 256> e4m3_table() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) t[size_t(b)] = e4m3_to_f32(uint8_t(b));
  return t;
}

// A projection weight [rows, cols] as stored, with the tensors that may sit beside it.
struct StoredWeight {
  std::string name;
  TensorView view;
  int64_t rows = 0;
  int64_t cols = 0;
  Beside scale_inv, scale, scale_2, input_scale;

  std::string described_as_projection() const {
    return "'" + name + "' [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  }
  void expect_shape(const std::vector<int64_t>& shape, const std::string& format) const {
    if (view.shape != shape) {
      invalid("tensor '" + name + "' is " + described(view) + "; expected " + shape_string(shape) +
              " for " + format + " of the projection " + described_as_projection());
    }
  }
  void check_input_scale() const {
    if (input_scale.view) scalar_f32(input_scale, "the activation scale of " + name);
  }
  // Allocated only once the stored shapes have vouched for rows and cols.
  std::vector<float> dense() const { return std::vector<float>(size_t(rows * cols)); }
};

std::vector<float> convert_16_or_32_bit(const StoredWeight& w) {
  const std::string format(dtype_name(w.view.dtype));
  w.expect_shape({w.rows, w.cols}, format);
  for (const Beside* b : {&w.scale_inv, &w.scale, &w.scale_2, &w.input_scale}) {
    refuse(*b, w.name, format);
  }
  auto out = w.dense();  // [rows, cols]
  const DType dtype = w.view.dtype;
  for (int64_t i = 0; i < w.rows * w.cols; ++i) {
    out[size_t(i)] = dtype == DType::kF32   ? load<float>(w.view.data, i)
                     : dtype == DType::kF16 ? f16_to_f32(load<uint16_t>(w.view.data, i))
                                            : bf16_to_f32(load<uint16_t>(w.view.data, i));
  }
  return out;
}

std::vector<float> dequantize_block_fp8(const StoredWeight& w) {
  const int64_t sr = (w.rows + kFp8Block - 1) / kFp8Block;
  const int64_t sc = (w.cols + kFp8Block - 1) / kFp8Block;
  expect(w.scale_inv, {DType::kF32}, {sr, sc},
         "one per 128x128 block of " + w.described_as_projection());
  const auto e4m3 = e4m3_table();
  const auto* q = reinterpret_cast<const uint8_t*>(w.view.data);  // [rows, cols]
  auto out = w.dense();
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t c = 0; c < w.cols; ++c) {
      const float s = load<float>(w.scale_inv.view->data, (r / kFp8Block) * sc + c / kFp8Block);
      out[size_t(r * w.cols + c)] = e4m3[q[r * w.cols + c]] * s;
    }
  }
  return out;
}

std::vector<float> dequantize_mxfp8(const StoredWeight& w) {
  if (w.cols % kMxBlock != 0) {
    invalid("MXFP8 weight " + w.described_as_projection() +
            " needs cols divisible by 32 (one scale per 32 values)");
  }
  const int64_t sc = w.cols / kMxBlock;
  expect(w.scale, {DType::kF8E8M0, DType::kU8}, {w.rows, sc},
         "one per 32 values of " + w.described_as_projection());
  const auto e4m3 = e4m3_table();
  const auto* q = reinterpret_cast<const uint8_t*>(w.view.data);         // [rows, cols]
  const auto* e = reinterpret_cast<const uint8_t*>(w.scale.view->data);  // [rows, cols/32]
  auto out = w.dense();
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t c = 0; c < w.cols; ++c) {
      out[size_t(r * w.cols + c)] = e4m3[q[r * w.cols + c]] * e8m0_to_f32(e[r * sc + c / kMxBlock]);
    }
  }
  return out;
}

std::vector<float> dequantize_fp8(const StoredWeight& w) {
  w.expect_shape({w.rows, w.cols}, "F8_E4M3");
  if (w.scale_inv.view && w.scale.view) {
    invalid("F8_E4M3 weight " + w.described_as_projection() + " has both '" + w.scale_inv.name +
            "' (block FP8) and '" + w.scale.name + "' (MXFP8); expected one");
  }
  if (!w.scale_inv.view && !w.scale.view) {
    invalid("F8_E4M3 weight " + w.described_as_projection() + " has neither '" + w.scale_inv.name +
            "' (block FP8) nor '" + w.scale.name + "' (MXFP8)");
  }
  refuse(w.scale_2, w.name, "FP8");
  w.check_input_scale();
  return w.scale_inv.view ? dequantize_block_fp8(w) : dequantize_mxfp8(w);
}

std::vector<float> dequantize_nvfp4(const StoredWeight& w) {
  const std::string per_block = "one per 16 values of " + w.described_as_projection();
  if (w.cols % kNvBlock != 0) {
    invalid("NVFP4 weight " + w.described_as_projection() +
            " needs cols divisible by 16 (one scale per 16 values)");
  }
  w.expect_shape({w.rows, w.cols / 2}, "NVFP4 (two E2M1 per U8)");
  refuse(w.scale_inv, w.name, "NVFP4");
  if (!w.scale.view) invalid("NVFP4 weight needs '" + w.scale.name + "' (" + per_block + ")");
  if (!w.scale_2.view) invalid("NVFP4 weight needs '" + w.scale_2.name + "' (F32 [] or [1])");
  const int64_t sc = w.cols / kNvBlock;
  expect(w.scale, {DType::kF8E4M3}, {w.rows, sc}, per_block);
  const float s2 = scalar_f32(w.scale_2, "the global scale of " + w.described_as_projection());
  w.check_input_scale();
  const auto e4m3 = e4m3_table();
  const auto* packed = reinterpret_cast<const uint8_t*>(w.view.data);    // [rows, cols/2]
  const auto* s = reinterpret_cast<const uint8_t*>(w.scale.view->data);  // [rows, cols/16]
  auto out = w.dense();
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t c = 0; c < w.cols; ++c) {
      const uint8_t byte = packed[r * (w.cols / 2) + c / 2];
      const uint8_t nibble = (c % 2 == 0) ? (byte & 0xf) : (byte >> 4);
      // e2m1 * e4m3 is exact in FP32, so the value is rounded once, by the global scale.
      out[size_t(r * w.cols + c)] = (e2m1_to_f32(nibble) * e4m3[s[r * sc + c / kNvBlock]]) * s2;
    }
  }
  return out;
}

}  // namespace

bool is_auxiliary_tensor_name(const std::string& name) {
  return ends_with(name, kScaleInvSuffix) || ends_with(name, kScaleSuffix) ||
         ends_with(name, kScale2Suffix) || ends_with(name, kInputScaleSuffix);
}

namespace {

StoredWeight stored_weight(const TensorSource& src, const std::string& weight_name, int64_t rows,
                           int64_t cols, const char* caller) {
  if (rows <= 0 || cols <= 0 || rows > std::numeric_limits<int64_t>::max() / cols) {
    throw Error(ErrorKind::kInvalidArgument, std::string(caller) + "('" + weight_name + "'): [" +
                                                 std::to_string(rows) + ", " +
                                                 std::to_string(cols) + "] is not a matrix shape");
  }
  const auto view = src.find(weight_name);
  if (!view) invalid("tensor '" + weight_name + "' is missing");
  SPARKGLM_ASSERT(view->nbytes == size_t(view->numel()) * size_t(dtype_size(view->dtype)),
                  "tensor view of " + weight_name + " disagrees with its shape");
  const std::string stem = ends_with(weight_name, ".weight")
                               ? weight_name.substr(0, weight_name.size() - 7)
                               : weight_name;
  auto beside = [&](const char* suffix) { return Beside{stem + suffix, src.find(stem + suffix)}; };
  return StoredWeight{weight_name,
                      *view,
                      rows,
                      cols,
                      beside(kScaleInvSuffix),
                      beside(kScaleSuffix),
                      beside(kScale2Suffix),
                      beside(kInputScaleSuffix)};
}

}  // namespace

std::vector<float> dequantize_linear(const TensorSource& src, const std::string& weight_name,
                                     int64_t rows, int64_t cols) {
  const StoredWeight w = stored_weight(src, weight_name, rows, cols, "dequantize_linear");
  switch (w.view.dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return convert_16_or_32_bit(w);
    case DType::kF8E4M3:
      return dequantize_fp8(w);
    case DType::kU8:
      return dequantize_nvfp4(w);
    default:
      invalid("tensor '" + weight_name + "' is " + described(w.view) +
              "; a projection is stored as F32, F16, BF16, F8_E4M3 (block FP8 or MXFP8) or U8 "
              "(NVFP4)");
  }
}

Linear stored_linear(const TensorSource& src, const std::string& weight_name, int64_t rows,
                     int64_t cols) {
  const StoredWeight w = stored_weight(src, weight_name, rows, cols, "stored_linear");
  Linear out{w.view.dtype, rows, cols, w.view.data};
  if (w.view.dtype == DType::kF8E4M3) {
    // The same checks as the dequantizer, on shapes and dtypes only: the bytes are not read.
    w.expect_shape({rows, cols}, "F8_E4M3");
    if (w.scale_inv.view.has_value() == w.scale.view.has_value()) {
      invalid("F8_E4M3 weight " + w.described_as_projection() + " needs exactly one of '" +
              w.scale_inv.name + "' (block FP8) and '" + w.scale.name + "' (MXFP8)");
    }
    refuse(w.scale_2, w.name, "FP8");
    w.check_input_scale();
    if (w.scale_inv.view) {
      expect(w.scale_inv, {DType::kF32},
             {(rows + kFp8Block - 1) / kFp8Block, (cols + kFp8Block - 1) / kFp8Block},
             "one per 128x128 block of " + w.described_as_projection());
      out.format = LinearFormat::kFp8Block;
      out.scale_inv = reinterpret_cast<const float*>(w.scale_inv.view->data);
      return out;
    }
    if (cols % kMxBlock != 0) {
      invalid("MXFP8 weight " + w.described_as_projection() +
              " needs cols divisible by 32 (one scale per 32 values)");
    }
    expect(w.scale, {DType::kF8E8M0, DType::kU8}, {rows, cols / kMxBlock},
           "one per 32 values of " + w.described_as_projection());
    out.format = LinearFormat::kMxfp8;
    out.scale = reinterpret_cast<const uint8_t*>(w.scale.view->data);
    return out;
  }
  if (w.view.dtype == DType::kU8) {
    if (cols % kNvBlock != 0) {
      invalid("NVFP4 weight " + w.described_as_projection() +
              " needs cols divisible by 16 (one scale per 16 values)");
    }
    w.expect_shape({rows, cols / 2}, "NVFP4 (two E2M1 per U8)");
    refuse(w.scale_inv, w.name, "NVFP4");
    if (!w.scale.view) invalid("NVFP4 weight needs '" + w.scale.name + "'");
    if (!w.scale_2.view) invalid("NVFP4 weight needs '" + w.scale_2.name + "' (F32 [] or [1])");
    expect(w.scale, {DType::kF8E4M3}, {rows, cols / kNvBlock},
           "one per 16 values of " + w.described_as_projection());
    w.check_input_scale();
    out.format = LinearFormat::kNvfp4;
    out.scale = reinterpret_cast<const uint8_t*>(w.scale.view->data);
    out.global_scale = scalar_f32(w.scale_2, "the global scale of " + w.described_as_projection());
    return out;
  }
  invalid("tensor '" + weight_name + "' is " + described(w.view) +
          "; a projection kept in its stored format is F8_E4M3 (block FP8 or MXFP8) or U8 (NVFP4)");
}

}  // namespace sparkglm
