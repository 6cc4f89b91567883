#pragma once
// The precision modes of MODEL.md section 7, applied to bound weights on the CPU reference.
//
//   strict  the checkpoint's formats as bound: nothing changes.
//   spark   what GB10's FP4 tensor cores compute:
//           - every KDA projection (q, k, v, f_a, f_b, b, g_a, g_b, o) and every shared-expert
//             projection is converted to NVFP4 with round-to-nearest-even (weight_quantizer.h:
//             global scale amax / (6 * 448) over the matrix, one E4M3 scale per 16 values of a
//             row) and used dequantized;
//           - every routed expert's activations (its gate/up input and its down input) are rounded
//             through NVFP4 row by row, with the expert's calibrated global scales: the
//             checkpoint's input_scale (for gate/up the larger of the two, since they read one
//             input), or routed_expert_input_scale (checkpoint_format.h) where the checkpoint has
//             none.
//           MLA, the indexer, the dense MLP, the routed experts' weights, the embedding and the LM
//           head keep their checkpoint formats. Each row is quantized on its own, so spark keeps
//           batch invariance.
#include <string_view>

#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sparkglm {

enum class PrecisionMode { kStrict, kSpark };

// "strict" | "spark"; anything else is an Error(kInvalidArgument) naming both.
PrecisionMode precision_mode_from_name(std::string_view name);

// "strict" | "spark": the option's value, as logs and identities spell it.
const char* precision_mode_name(PrecisionMode mode);

// Applies `mode` to `weights` (bound for `config`), keeping converted matrices in weights.owned.
// A projection spark cannot convert (columns not a multiple of 16) is an Error(kUnsupported) naming
// the tensor; an input_scale that is not a positive finite F32 scalar is an
// Error(kInvalidCheckpoint) naming it.
void apply_precision_mode(const ModelConfig& config, PrecisionMode mode, ModelWeights& weights);

// True for a tensor of checkpoint_tensors(config) that spark converts to NVFP4 (a KDA projection
// of a linear-attention layer, or a shared-expert projection): what a backend converting on its
// own (the CUDA DeviceWeights) asks of each tensor, so both backends convert the same set.
bool spark_converts(const ModelConfig& config, std::string_view tensor_name);

// Spark's activation scales alone: every MoE layer's fp4_activations (the MTP layer's too) from
// weights.source's input_scale tensors (or the derived ones), as apply_precision_mode sets them.
// Errors as apply_precision_mode's.
void set_fp4_activation_scales(const ModelConfig& config, ModelWeights& weights);

}  // namespace sparkglm
