#pragma once
// Device pieces shared by the quantized MoE kernels (moe_quant_experts.cu, moe_prefill_quant.cu):
// one expert's view of a MoeQuantOperand and the element decoders, each exact and equal to
// core/dtype.h's conversion.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/moe_quant_experts.h"

namespace sparkglm::cuda::moe_quant {

// One expert's projection: its data and the scales its format uses (unused ones null).
struct ExpertView {
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
  const float* scale_inv = nullptr;
  float global_scale = 1.0f;
};

__device__ __forceinline__ ExpertView view_of(const MoeQuantOperand& op, int e) {
  ExpertView v;
  v.data = op.data[e];
  v.scale = op.scale ? op.scale[e] : nullptr;
  v.scale_inv = op.scale_inv ? op.scale_inv[e] : nullptr;
  v.global_scale = op.global_scale ? op.global_scale[e] : 1.0f;
  return v;
}

// core/dtype.h's e8m0_to_f32: 2^(e - 127), code 0 the FP32 subnormal 2^-127, 0xff NaN.
__device__ __forceinline__ float e8m0_to_f32_dev(uint32_t e) {
  return e == 0xffu ? __uint_as_float(0x7fc00000u)
                    : (e == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(e << 23));
}

// core/dtype.h's e2m1_to_f32 on the low 4 bits: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the
// sign (0x8 is -0).
__device__ __forceinline__ float e2m1_to_f32_dev(uint32_t nibble) {
  const uint32_t exp = (nibble >> 1) & 3u, man = nibble & 1u;
  const uint32_t mag = exp == 0 ? (man ? 0x3f000000u : 0u) : (((exp + 126u) << 23) | (man << 22));
  return __uint_as_float(mag | ((nibble & 8u) << 28));
}

// fn(std::integral_constant<QuantFormat, f>{}): a host switch to the kernel template of format f.
template <typename Fn>
void by_format(QuantFormat f, Fn&& fn) {
  switch (f) {
    case QuantFormat::kNvfp4:
      fn(std::integral_constant<QuantFormat, QuantFormat::kNvfp4>{});
      break;
    case QuantFormat::kMxfp8:
      fn(std::integral_constant<QuantFormat, QuantFormat::kMxfp8>{});
      break;
    case QuantFormat::kFp8Block:
      fn(std::integral_constant<QuantFormat, QuantFormat::kFp8Block>{});
      break;
  }
}

}  // namespace sparkglm::cuda::moe_quant
