#pragma once
// The stored formats of a projection weight (MODEL.md section 7) and their exact dequantization
// to dense FP32. `<stem>` is the weight's name without its trailing ".weight".
//
//   F32 / F16 / BF16 [rows, cols]                   converted exactly
//   F8_E4M3 [rows, cols] + <stem>.weight_scale_inv  block FP8: F32 [ceil(rows/128),
//   ceil(cols/128)],
//                                                   w = e4m3 * scale_inv[r/128][c/128]
//   F8_E4M3 [rows, cols] + <stem>.weight_scale      MXFP8: F8_E8M0 or U8 [rows, cols/32],
//                                                   w = e4m3 * 2^(e - 127)
//   U8 [rows, cols/2] + <stem>.weight_scale         NVFP4: two E2M1 per byte, low nibble = even
//                       + <stem>.weight_scale_2     column; weight_scale F8_E4M3 [rows, cols/16],
//                       (+ <stem>.input_scale)      weight_scale_2 F32 [] or [1],
//                                                   w = e2m1 * e4m3(weight_scale) * weight_scale_2
//
// input_scale (F32 [] or [1]) may sit beside any quantized format; it scales activations, so it
// does not enter the weight.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/tensor_source.h"
#include "engine/model/weights.h"

namespace sparkglm {

// Dense row-major FP32 [rows, cols] of `weight_name` and its scale tensors. A stored dtype outside
// the table, a shape other than the expected one, or a scale tensor of the wrong dtype or shape is
// an Error(kInvalidCheckpoint) naming the tensor and what was expected.
std::vector<float> dequantize_linear(const TensorSource& src, const std::string& weight_name,
                                     int64_t rows, int64_t cols);

// `weight_name` as stored, F8_E4M3 or U8, described without reading its bytes (the device
// loader's view): format, data, scale or scale_inv, and global_scale read from weight_scale_2
// (which must therefore be host memory). The same shape and dtype checks as dequantize_linear, the
// same Error(kInvalidCheckpoint) naming the tensor.
Linear stored_linear(const TensorSource& src, const std::string& weight_name, int64_t rows,
                     int64_t cols);

// True for the scale tensors that accompany a quantized weight (.weight_scale_inv, .weight_scale,
// .weight_scale_2, .input_scale), which the weight binder accepts without binding them itself.
bool is_auxiliary_tensor_name(const std::string& name);

}  // namespace sparkglm
