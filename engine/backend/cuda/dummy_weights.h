#pragma once
// Dummy weights generated on the device, bit-identical to tinyglm/dummy_weights.cpp on the CPU:
// the same counter-based function (tinyglm/dummy_hash.h) and the same round-to-nearest-even BF16.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// dst: [n] BF16 (as uint16) or FP32; key = dummy::tensor_key(seed, name).
void fill_dummy_bf16(uint16_t* dst, int64_t n, uint64_t key, float center, float half_width,
                     cudaStream_t stream);
void fill_dummy_f32(float* dst, int64_t n, uint64_t key, float center, float half_width,
                    cudaStream_t stream);

}  // namespace sparkglm::cuda
