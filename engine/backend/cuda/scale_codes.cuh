#pragma once
// Device decoders of the FP4-Local element and scale codes (MODEL.md section 7), bit for bit
// core/dtype.h's host ones, shared by every kernel that dequantizes in registers.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// core/dtype.h's e8m0_to_f32: 2^(e - 127), code 0 the FP32 subnormal 2^-127, 0xff NaN.
__device__ __forceinline__ float e8m0_to_f32_dev(uint32_t e) {
  return e == 0xffu ? __uint_as_float(0x7fc00000u)
                    : (e == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(e << 23));
}

// core/dtype.h's e2m1_to_f32 on the low 4 bits: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the
// sign (so 0x8 is -0, as on the CPU).
__device__ __forceinline__ float e2m1_to_f32_dev(uint32_t nibble) {
  const uint32_t exp = (nibble >> 1) & 3u, man = nibble & 1u;
  const uint32_t mag = exp == 0 ? (man ? 0x3f000000u : 0u) : (((exp + 126u) << 23) | (man << 22));
  return __uint_as_float(mag | ((nibble & 8u) << 28));
}

}  // namespace sparkglm::cuda
