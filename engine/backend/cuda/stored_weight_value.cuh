#pragma once
// One weight of a projection kept in an FP4-Local format, as the CPU reference dequantizes it
// (weight_formats.cpp's FP32 value, __fmul_rn rounding where the CPU rounds): what the BF16
// dequantization of the prefill path and spark's NVFP4 conversion of a stored projection read.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/quantized_linear.h"
#include "engine/backend/cuda/scale_codes.cuh"

namespace sparkglm::cuda {

// w[r][c] in FP32.
__device__ inline float stored_weight_value(const QuantizedWeight& w, int64_t r, int64_t c) {
  if (w.format == QuantFormat::kNvfp4) {
    const uint8_t byte = w.data[(r * w.cols + c) / 2];  // row-major [rows, cols/2], cols even
    const float e2m1 = e2m1_to_f32_dev(c % 2 == 0 ? (byte & 0xfu) : uint32_t(byte >> 4));
    return __fmul_rn(__fmul_rn(e2m1, e4m3_to_f32(w.scale[r * (w.cols / 16) + c / 16])),
                     w.global_scale);
  }
  if (w.format == QuantFormat::kMxfp8)
    return __fmul_rn(e4m3_to_f32(w.data[r * w.cols + c]),
                     e8m0_to_f32_dev(w.scale[r * (w.cols / 32) + c / 32]));
  const int64_t sc = (w.cols + 127) / 128;
  return __fmul_rn(e4m3_to_f32(w.data[r * w.cols + c]), w.scale_inv[(r / 128) * sc + c / 128]);
}

}  // namespace sparkglm::cuda
