#pragma once
// The checkpoint formats `sparkglm tinyglm make --weight-format` writes and the memory plan counts:
//   bf16       every projection and the embedding in BF16, the rest F32 (tensor_layout.h's dtypes);
//   fp4-local  the layout of nvidia/GLM-5.3-Flash-FP4-Local (MODEL.md section 7):
//                routed experts                              NVFP4
//                KDA projections, dense MLP, LM head         MXFP8
//                MLA projections (and the indexer's wq_b,
//                wk), shared experts                         FP8 with 128x128 block scales
//                everything else                             as in bf16
//              The indexer's weights_proj [I, D] and kpool_gate [1, D] produce per-head weights
//              and a gate scalar, and the MTP eh_proj is named by no row of MODEL.md's table: they
//              stay BF16. docs/checkpoint.md lists the tensors each format stores.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "engine/model/config.h"
#include "engine/model/tensor_layout.h"

namespace sparkglm {

enum class CheckpointFormat { kBf16, kFp4Local };

// How one tensor is stored: as tensor_layout.h's dtype, or quantized (with its scale tensors).
enum class WeightFormat { kAsLaidOut, kNvfp4, kMxfp8, kFp8Block };

// "bf16" | "fp4-local"; anything else is an Error(kInvalidArgument) naming both.
CheckpointFormat checkpoint_format_from_name(std::string_view name);
const char* checkpoint_format_name(CheckpointFormat f);
const char* weight_format_name(WeightFormat f);  // "BF16/F32", "NVFP4", "MXFP8", "FP8 block"

// The format of `spec` (a tensor of checkpoint_tensors(config)) in checkpoint format `f`.
WeightFormat weight_format(const ModelConfig& config, const TensorSpec& spec, CheckpointFormat f);

// Bytes the tensor and its scale tensors take in `format`:
//   as laid out  numel * dtype size
//   NVFP4        rows*cols/2 + rows*cols/16 (E4M3 scales) + 4 (weight_scale_2) + 4 (input_scale)
//   MXFP8        rows*cols + rows*cols/32 (E8M0 scales)
//   FP8 block    rows*cols + 4 * ceil(rows/128) * ceil(cols/128) (FP32 weight_scale_inv)
int64_t stored_bytes(const TensorSpec& spec, WeightFormat format);

// The `input_scale` fp4-local stores beside a routed expert's projection `weight_name`: the largest
// input magnitude the projection can see, over 6 * 448 (NVFP4's largest product), so calibrated FP4
// activations never saturate. gate/up read an RMSNorm output with unit weights, whose elements are
// at most sqrt(hidden_size) times its RMS of 1; down reads SiLU(min(g, L)) * clamp(u, -L, L), at
// most swiglu_limit^2 in magnitude.
float routed_expert_input_scale(const ModelConfig& config, std::string_view weight_name);

// config.json's `quantization_config` for fp4-local (ModelOpt's mixed-precision form): every
// quantized module by name (the routed experts of a layer as one "...experts.*" entry) with its
// quant_algo and block size.
nlohmann::json fp4_local_quantization_config(const ModelConfig& config);

}  // namespace sparkglm
