#pragma once
// The small row-wise steps that join the operators into a model (cuda_model_runner): the dense
// SwiGLU, gathering rows, a residual add and a BF16 concatenation. Each thread touches one
// element of one row, so rows never depend on each other.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// h[t][j] = SiLU(g) * u with g = gu[t][j], u = gu[t][W + j] (limit > 0: SiLU(min(g, limit)) *
// clamp(u, -limit, limit), cpu::swiglu_forward's order). gu: [T, 2W] FP32; h: [T, W] BF16 bits.
void swiglu_rows(const float* gu, int64_t rows, int64_t width, float limit, uint16_t* h,
                 cudaStream_t stream);

// dst[i] = src[index[i]] for i < n rows of `width` floats; index on the device.
void gather_rows(const float* src, const int32_t* index, int64_t n, int64_t width, float* dst,
                 cudaStream_t stream);

// tokens[r] = picks[from[r]] (0 where that pick is -1) for each of `rows` rows with from[r] >= 0:
// a pipelined step's input tokens that the previous step picked on the device.
void take_picked_tokens(const int32_t* from, const int32_t* picks, int64_t rows, int32_t* tokens,
                        cudaStream_t stream);

// x += y, n floats.
void add_in_place(float* x, const float* y, int64_t n, cudaStream_t stream);

// out[t] = [a[t] ; b[t]] as BF16 bits: a, b: [rows, d] FP32; out: [rows, 2d]. The MTP module's
// input now takes norms.h's mtp_entry_bf16, which tests/cuda/norms_cuda_test.cpp holds to this.
void concat_bf16(const float* a, const float* b, int64_t rows, int64_t d, uint16_t* out,
                 cudaStream_t stream);

}  // namespace sparkglm::cuda
