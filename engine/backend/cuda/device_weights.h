#pragma once
// The model's weights in device memory: one arena holding every tensor of
// checkpoint_tensors(config) in checkpoint order (256-byte aligned, so an expert's gate_proj is
// followed directly by its up_proj: the [2W, D] operand the fused gate/up projections read), bound
// through the ordinary ModelWeights::bind. The bound pointers are device pointers: only device code
// may read them.
//
// Two ways to fill it: generate a preset's dummy weights on the device (the same bits as
// tinyglm/dummy_weights.cpp, never a host copy: glm-5.3-flash at depth is larger than host memory),
// or upload a host checkpoint whose tensors are BF16 or FP32 (other formats are refused: the device
// path does not convert quantized checkpoints yet).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sparkglm::cuda {

class DeviceWeights {
 public:
  // Bytes the arena takes for this config (what a memory plan needs before allocating).
  static size_t arena_bytes(const ModelConfig& config);

  static std::unique_ptr<DeviceWeights> generate(const ModelConfig& config, uint64_t seed);
  static std::unique_ptr<DeviceWeights> upload(const ModelConfig& config, const TensorSource& host);

  const ModelWeights& weights() const { return weights_; }
  size_t bytes() const { return arena_.bytes(); }
  const std::string& identity() const { return identity_; }

 private:
  DeviceBuffer arena_;
  ModelWeights weights_;
  std::string identity_;
};

}  // namespace sparkglm::cuda
