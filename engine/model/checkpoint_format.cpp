#include "engine/model/checkpoint_format.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

WeightFormat fp4_local_format(const ModelConfig& c, std::string_view name) {
  if (name == "lm_head.weight") return WeightFormat::kMxfp8;
  constexpr std::string_view kLayers = "model.layers.";
  if (!starts_with(name, kLayers)) return WeightFormat::kAsLaidOut;  // embedding, norm, head mHC
  const size_t dot = name.find('.', kLayers.size());
  const int layer = std::stoi(std::string(name.substr(kLayers.size(), dot - kLayers.size())));
  const std::string_view rest = name.substr(dot + 1);
  if (starts_with(rest, "self_attn.indexer.")) {
    const bool projection = ends_with(rest, ".wq_b.weight") || ends_with(rest, ".wk.weight");
    return projection ? WeightFormat::kFp8Block : WeightFormat::kAsLaidOut;
  }
  const bool projection =
      ends_with(rest, "_proj.weight") || rest == "self_attn.kv_a_proj_with_mqa.weight";
  if (!projection || rest == "eh_proj.weight")
    return WeightFormat::kAsLaidOut;  // norms, convolutions, gates, router, mHC, eh_proj
  if (starts_with(rest, "mlp.experts.")) return WeightFormat::kNvfp4;
  if (starts_with(rest, "mlp.shared_experts.")) return WeightFormat::kFp8Block;
  if (starts_with(rest, "mlp.")) return WeightFormat::kMxfp8;  // the dense MLP of layers 0-2
  const bool mla = layer == c.mtp_layer() || c.layer_kind(layer) == LayerKind::kSparseAttention;
  return mla ? WeightFormat::kFp8Block : WeightFormat::kMxfp8;
}

}  // namespace

CheckpointFormat checkpoint_format_from_name(std::string_view name) {
  if (name == "bf16") return CheckpointFormat::kBf16;
  if (name == "fp4-local") return CheckpointFormat::kFp4Local;
  throw Error(ErrorKind::kInvalidArgument,
              "weight format '" + std::string(name) + "': expected bf16 or fp4-local");
}

const char* checkpoint_format_name(CheckpointFormat f) {
  return f == CheckpointFormat::kBf16 ? "bf16" : "fp4-local";
}

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kNvfp4:
      return "NVFP4";
    case WeightFormat::kMxfp8:
      return "MXFP8";
    case WeightFormat::kFp8Block:
      return "FP8 block";
    case WeightFormat::kAsLaidOut:
      break;
  }
  return "BF16/F32";
}

WeightFormat weight_format(const ModelConfig& config, const TensorSpec& spec, CheckpointFormat f) {
  return f == CheckpointFormat::kBf16 ? WeightFormat::kAsLaidOut
                                      : fp4_local_format(config, spec.name);
}

int64_t stored_bytes(const TensorSpec& spec, WeightFormat format) {
  const int64_t n = spec.numel();
  if (format == WeightFormat::kAsLaidOut) return n * dtype_size(spec.dtype);
  const int64_t rows = spec.shape.at(0), cols = spec.shape.at(1);
  switch (format) {
    case WeightFormat::kNvfp4:
      return n / 2 + n / 16 + 4 + 4;
    case WeightFormat::kMxfp8:
      return n + n / 32;
    default:
      return n + 4 * ((rows + 127) / 128) * ((cols + 127) / 128);
  }
}

float routed_expert_input_scale(const ModelConfig& c, std::string_view weight_name) {
  const float amax = ends_with(weight_name, "down_proj.weight") ? c.swiglu_limit * c.swiglu_limit
                                                                : std::sqrt(float(c.hidden_size));
  return amax / (6.0f * 448.0f);
}

nlohmann::json fp4_local_quantization_config(const ModelConfig& config) {
  nlohmann::json layers = nlohmann::json::object();
  for (const TensorSpec& spec : checkpoint_tensors(config)) {
    const WeightFormat f = fp4_local_format(config, spec.name);
    if (f == WeightFormat::kAsLaidOut) continue;
    std::string module = spec.name.substr(0, spec.name.size() - std::string(".weight").size());
    if (const size_t e = module.find(".mlp.experts."); e != std::string::npos)
      module = module.substr(0, e) + ".mlp.experts.*";
    if (f == WeightFormat::kNvfp4) {
      layers[module] = {{"quant_algo", "NVFP4"}, {"group_size", 16}};
    } else if (f == WeightFormat::kMxfp8) {
      layers[module] = {{"quant_algo", "MXFP8"}, {"group_size", 32}};
    } else {
      layers[module] = {{"quant_algo", "FP8_BLOCK"}, {"weight_block_size", {128, 128}}};
    }
  }
  return {{"quant_method", "modelopt"},
          {"quant_algo", "MIXED_PRECISION"},
          {"kv_cache_quant_algo", nullptr},
          {"quantized_layers", layers}};
}

}  // namespace sparkglm
