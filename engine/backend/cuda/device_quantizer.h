#pragma once
// A preset's dummy projections quantized on the device into the FP4-Local formats (MODEL.md
// section 7), byte for byte what engine/model/weight_quantizer.cpp makes on the CPU from the same
// BF16 dummy values (tinyglm/stored_weights.h): the same element rounding (round_e4m3, round_e2m1
// ported step for step, FP64 quotients rounded once, ties to even), the same scale rules and the
// same FP32 divisions. The dummy value of element i is f32(bf16(dummy::value(key, i, center,
// half_width))), computed in the kernel: no FP32 or BF16 copy of the tensor is ever made.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/model/weights.h"

namespace sparkglm::cuda {

// The dummy tensor to quantize: [rows, cols], key = dummy::tensor_key(seed, name).
struct DummyMatrix {
  int64_t rows = 0, cols = 0;
  uint64_t key = 0;
  float center = 0.0f, half_width = 0.0f;
};

// values: E4M3 [rows, cols]; scale: E8M0 [rows, cols/32]. cols % 32 == 0.
void quantize_dummy_mxfp8(const DummyMatrix& m, uint8_t* values, uint8_t* scale,
                          cudaStream_t stream);
// values: E4M3 [rows, cols]; scale_inv: FP32 [ceil(rows/128), ceil(cols/128)].
void quantize_dummy_fp8_block(const DummyMatrix& m, uint8_t* values, float* scale_inv,
                              cudaStream_t stream);
// packed: [rows, cols/2] (low nibble = even column); scale: E4M3 [rows, cols/16]. cols % 16 == 0.
// The tensor's amax is a device reduction read back to the host (this call synchronizes
// `stream`); returns weight_scale_2 = nvfp4_global_scale(amax).
float quantize_dummy_nvfp4(const DummyMatrix& m, uint8_t* packed, uint8_t* scale,
                           cudaStream_t stream);

// --precision-mode spark's conversion (precision_mode.cpp's convert_to_fp4) of a projection
// already on the device, BF16, FP32 or in an FP4-Local format: quantize_nvfp4 of its FP32 values
// as the CPU reads them (Linear::at, or the dequantized value: stored_weight_value.cuh), so the
// codes are the CPU's, and dequantized they give the CPU's converted FP32 matrix. packed / scale
// as above; synchronises `stream`; returns weight_scale_2.
float quantize_linear_nvfp4(const Linear& w, uint8_t* packed, uint8_t* scale, cudaStream_t stream);

}  // namespace sparkglm::cuda
