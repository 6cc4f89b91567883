#pragma once
// The device arrays the quantized MoE kernels (moe_quant_experts.h, moe_prefill_quant.h) read for
// one layer, built from its bound Linears (whose data and scales already lie on the device): per
// routed operand (gate, up, down) the E experts' data, scale and scale_inv pointers and global
// scales, plus the shared expert's Linears as they are.
#include <cstdint>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/moe_quant_experts.h"
#include "engine/model/weights.h"

namespace sparkglm::cuda {

class MoeQuantTable {
 public:
  // True when the layer's routed experts are quantized (the first expert's gate_proj says).
  static bool quantized(const MoeWeights& moe);

  // Every routed gate / up [width, hidden] and down [hidden, width] must be quantized, one format
  // per operand across the experts (gate and up alike), with the scales of its format, data
  // 16-byte aligned and NVFP4 scales 2-byte aligned; the shared expert's projections must have
  // their shapes. Otherwise an Error(kInvalidArgument) naming the expert and operand. `moe` must
  // outlive the table (the shared Linears are referenced).
  static MoeQuantTable build(const MoeWeights& moe, int64_t hidden, int64_t width);

  const MoeQuantExperts& experts() const { return experts_; }

 private:
  DeviceBuffer arrays_;
  MoeQuantExperts experts_;
};

}  // namespace sparkglm::cuda
