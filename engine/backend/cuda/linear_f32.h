#pragma once
// y = x W^T with FP32 operands and FP32 accumulation: the MoE router (MODEL.md section 5 keeps it
// in FP32, and its top-8 choice is sensitive to the last bit of a logit).
//
// Every output follows cpu::linear's reduction order (8 lanes over k mod 8, FMA chains in
// increasing k, a fixed lane sum; cpu/linear.h), so the result equals the CPU reference bit for
// bit and a row's result never depends on which other rows share the batch, for any m. m <= 32
// streams W once through shared memory; larger m runs a tiled CUDA-core kernel (FP32 FMA, no
// TF32) with the same per-element arithmetic. No allocation, no host synchronisation: safe to
// capture in a CUDA graph.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// x: [m, k]; w: [n, k] (nn.Linear layout); y: [m, n]. k must be a multiple of 4 and x, w
// 16-byte aligned.
void linear_f32(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y,
                cudaStream_t stream);

}  // namespace sparkglm::cuda
