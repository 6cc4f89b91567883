#pragma once
// Spark's FP4 activations (MODEL.md section 7, engine/model/precision_mode.h) on the device: rows
// rounded through NVFP4 as cpu/mlp.cpp rounds a routed expert's input and its SwiGLU output
// (weight_quantizer.h's round_trip_nvfp4): blocks of 16 consecutive values of a row, each block's
// E4M3 scale round_e4m3(amax / (6 * scale_2)), the values round_e2m1(x / (scale * scale_2)),
// ties to even; scale_2 the expert's calibrated global scale (input_scale). The block rule is
// fp4_rounding.cuh's port of the CPU's, so the codes are the CPU's bit for bit.
//
// What a row becomes is split the way GB10's block-scaled FP4 MMA splits it: q = e2m1 * e4m3
// block scale, exact in BF16 (the MMA operand), and the global scale, which multiplies the FP32
// product once. q * scale_2 rounded once in FP32 is round_trip_nvfp4's value.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// x: [rows, n] FP32 (the last block of a row may be shorter than 16); scale_2: [rows] FP32
// device; value: [rows, n] FP32, round_trip_nvfp4's result (null: not written); q: [rows, n]
// BF16 bits of e2m1 * e4m3 (null: not written). Stream-ordered, graph-capturable.
void fp4_round_trip_rows(const float* x, int64_t rows, int64_t n, const float* scale_2,
                         float* value, uint16_t* q, cudaStream_t stream);

}  // namespace sparkglm::cuda
