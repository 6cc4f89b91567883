#pragma once
// Device pieces shared by the quantized MoE kernels (moe_quant_experts.cu, moe_prefill_quant.cu):
// one expert's view of a MoeQuantOperand and the element decoders, each exact and equal to
// core/dtype.h's conversion.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/moe_quant_experts.h"
#include "engine/backend/cuda/scale_codes.cuh"

namespace sparkglm::cuda::moe_quant {

// One expert's projection: its data and the scales its format uses (unused ones null).
struct ExpertView {
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
  const float* scale_inv = nullptr;
  float global_scale = 1.0f;
};

// The decode launches' arguments: the grouped pairs and workspaces, and the routed operands.
struct QuantDecodeArgs {
  MoeExpertArgs a;
  MoeQuantOperand gate, up, down;
};

__device__ __forceinline__ ExpertView view_of(const MoeQuantOperand& op, int e) {
  ExpertView v;
  v.data = op.data[e];
  v.scale = op.scale ? op.scale[e] : nullptr;
  v.scale_inv = op.scale_inv ? op.scale_inv[e] : nullptr;
  v.global_scale = op.global_scale ? op.global_scale[e] : 1.0f;
  return v;
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
