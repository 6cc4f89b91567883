#pragma once
// The model's weights in device memory, bound through the ordinary ModelWeights::bind with
// Quantized::kKeep: every bound pointer is a device pointer (only device code may read it), and a
// projection stored in an FP4-Local format (MODEL.md section 7) stays in it: its Linear carries
// the format, the element bytes, the scales and the NVFP4 global scale (a host float). No BF16
// copy of a quantized projection exists, with one exception: MLA's kv_b_proj, which the
// absorption kernels read per head as BF16, is dequantized once into BF16 (weight_formats.h's
// FP32 value rounded to nearest even).
//
// Arena layout (one walk, ArenaLayout, serves the memory plan and the carving):
//   elements   every tensor of checkpoint_tensors(config) in checkpoint order: BF16/FP32 tensors
//              256-byte aligned, quantized elements 16-byte aligned, so an expert's gate_proj is
//              followed directly by its up_proj and KDA's q/k/v by one another (the fused
//              operands; their sizes are multiples of 16 bytes whenever cols % 32 == 0)
//   scales     then every quantized tensor's block scales in checkpoint order, each aligned to its
//              element size only (1 byte E8M0, 2 bytes NVFP4's E4M3 pairs, 4 bytes FP32
//              scale_inv): the scales of parts stored back to back are back to back too
//              (projection.h's fused checks it)
//   workspace  then the BF16 scratch a prefill product dequantizes its weight into (projection.h):
//              the largest quantized projection the runner's dense path takes, fused ones whole
//
// --precision-mode spark (precision_mode.h): every tensor spark_converts names is kept in NVFP4,
// whatever its stored format: the stored bytes go to a scratch buffer first (generated or
// uploaded as in strict), then quantize_linear_nvfp4 writes the CPU's codes, global scale and
// block scales into the arena; the bound weights carry the routed experts' activation scales
// (set_fp4_activation_scales). Strict lays out and fills exactly as without the mode.
//
// Two ways to fill it: generate a preset's dummy weights on the device (the same bits as
// tinyglm/dummy_weights.cpp, and in fp4-local the same bytes as tinyglm/stored_weights.cpp,
// quantized on the device: never a host copy), or upload a checkpoint: BF16/FP32 as laid out,
// or projections in MXFP8, FP8 block or NVFP4 (weight_formats.h). Upload streams the tensors
// through two pinned staging buffers, reading one while the other's copy runs.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/projection.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"
#include "engine/model/precision_mode.h"
#include "engine/model/weights.h"

namespace sparkglm::cuda {

class DeviceWeights {
 public:
  // Bytes the arena takes (elements, scales, workspace): what a memory plan needs before
  // allocating. For a preset in `format`, or for a checkpoint as `host` stores it (host is
  // checked as upload checks it).
  static size_t arena_bytes(const ModelConfig& config,
                            CheckpointFormat format = CheckpointFormat::kBf16,
                            PrecisionMode mode = PrecisionMode::kStrict);
  static size_t arena_bytes(const ModelConfig& config, const TensorSource& host,
                            PrecisionMode mode = PrecisionMode::kStrict);

  static std::unique_ptr<DeviceWeights> generate(const ModelConfig& config, uint64_t seed,
                                                 CheckpointFormat format = CheckpointFormat::kBf16,
                                                 PrecisionMode mode = PrecisionMode::kStrict);
  // Every tensor is checked before a byte moves (a refused checkpoint allocates nothing): a
  // missing tensor, a shape or dtype other than the layout's, a quantized tensor that is not a
  // projection (or is the embedding), or scales of the wrong dtype or shape is an Error naming the
  // tensor (kUnsupported for a stored form the CUDA kernels do not read, kInvalidCheckpoint for a
  // malformed one).
  static std::unique_ptr<DeviceWeights> upload(const ModelConfig& config, const TensorSource& host,
                                               PrecisionMode mode = PrecisionMode::kStrict);

  const ModelWeights& weights() const { return weights_; }
  size_t bytes() const { return arena_.bytes(); }
  const std::string& identity() const { return identity_; }
  DequantWorkspace dequant_workspace() const { return workspace_; }

 private:
  DeviceBuffer arena_;
  ModelWeights weights_;
  std::string identity_;
  DequantWorkspace workspace_;
};

}  // namespace sparkglm::cuda
