#include "engine/model/precision_mode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "engine/core/error.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/tensor_layout.h"
#include "engine/model/weight_quantizer.h"

namespace sparkglm {
namespace {

constexpr int64_t kNvBlock = 16;

// The KDA projections spark converts, as the checkpoint names them under self_attn.
constexpr const char* kKdaProjections[] = {"q_proj", "k_proj",   "v_proj",   "f_a_proj", "f_b_proj",
                                           "b_proj", "g_a_proj", "g_b_proj", "o_proj"};
constexpr const char* kSwiGluProjections[] = {"gate_proj", "up_proj", "down_proj"};

// `w` replaced by its NVFP4 round trip, kept in weights.owned.
void convert_to_fp4(Linear& w, const std::string& name, ModelWeights& weights) {
  if (w.cols % kNvBlock != 0)
    throw Error(ErrorKind::kUnsupported,
                "--precision-mode spark: '" + name + "' [" + std::to_string(w.rows) + ", " +
                    std::to_string(w.cols) + "] cannot be NVFP4 (columns not a multiple of 16)");
  std::vector<float> v(size_t(w.rows * w.cols));  // [rows, cols]
  float amax = 0.0f;
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) {
      v[size_t(r * w.cols + c)] = w.at(r, c);
      amax = std::max(amax, std::fabs(w.at(r, c)));
    }
  // Rows are whole blocks, so one pass over the matrix is the per-row NVFP4 of quantize_nvfp4.
  round_trip_nvfp4(v.data(), int64_t(v.size()), nvfp4_global_scale(amax));
  weights.owned.push_back(std::move(v));
  w = Linear{DType::kF32, w.rows, w.cols, weights.owned.back().data()};
}

// The checkpoint's input_scale beside `weight_name`, or the derived one when it has none.
float input_scale(const ModelConfig& c, const TensorSource* src, const std::string& weight_name) {
  const std::string name = weight_name.substr(0, weight_name.size() - 6) + "input_scale";
  const auto v = src ? src->find(name) : std::nullopt;
  if (!v) return routed_expert_input_scale(c, weight_name);
  float s = 0.0f;
  if (v->dtype == DType::kF32 && v->numel() == 1) std::memcpy(&s, v->data, sizeof s);
  if (!(std::isfinite(s) && s > 0.0f))
    throw Error(ErrorKind::kInvalidCheckpoint,
                "tensor '" + name + "': expected a positive finite F32 [] or [1] activation scale");
  return s;
}

void apply_spark(const ModelConfig& c, ModelWeights& weights) {
  auto convert_layer = [&](LayerWeights& l, const std::string& p) {
    if (l.kind == LayerKind::kLinearAttention) {
      KdaWeights& k = l.kda;
      Linear* w[] = {&k.q_proj, &k.k_proj, &k.v_proj, &k.f_a,   &k.f_b,
                     &k.b_proj, &k.g_a,    &k.g_b,    &k.o_proj};
      for (size_t i = 0; i < std::size(w); ++i)
        convert_to_fp4(*w[i], p + "self_attn." + kKdaProjections[i] + ".weight", weights);
    }
    if (l.dense_mlp || !l.moe.shared) return;
    Linear* w[] = {&l.moe.shared->gate, &l.moe.shared->up, &l.moe.shared->down};
    for (size_t i = 0; i < std::size(w); ++i)
      convert_to_fp4(*w[i], p + "mlp.shared_experts." + kSwiGluProjections[i] + ".weight", weights);
  };
  for (size_t i = 0; i < weights.layers.size(); ++i)
    convert_layer(weights.layers[i], layer_prefix(int(i)));
  if (weights.mtp) convert_layer(weights.mtp->layer, layer_prefix(c.mtp_layer()));
  set_fp4_activation_scales(c, weights);
}

}  // namespace

PrecisionMode precision_mode_from_name(std::string_view name) {
  if (name == "strict") return PrecisionMode::kStrict;
  if (name == "spark") return PrecisionMode::kSpark;
  throw Error(ErrorKind::kInvalidArgument,
              "precision mode '" + std::string(name) + "': expected strict or spark");
}

const char* precision_mode_name(PrecisionMode mode) {
  return mode == PrecisionMode::kSpark ? "spark" : "strict";
}

bool spark_converts(const ModelConfig& config, std::string_view name) {
  const std::string_view layers = "model.layers.";
  if (name.substr(0, layers.size()) != layers) return false;
  const std::string_view rest = name.substr(layers.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  int layer = 0;
  for (char ch : rest.substr(0, dot)) {
    if (ch < '0' || ch > '9' || layer > 1000000) return false;
    layer = layer * 10 + (ch - '0');
  }
  const std::string_view tail = rest.substr(dot + 1);
  for (const char* n : kSwiGluProjections)
    if (tail == std::string("mlp.shared_experts.") + n + ".weight") return true;
  if (layer >= config.num_hidden_layers || config.layer_kind(layer) != LayerKind::kLinearAttention)
    return false;
  for (const char* n : kKdaProjections)
    if (tail == std::string("self_attn.") + n + ".weight") return true;
  return false;
}

void set_fp4_activation_scales(const ModelConfig& c, ModelWeights& weights) {
  const TensorSource* src = weights.source.get();
  auto set_layer = [&](LayerWeights& l, const std::string& p) {
    if (l.dense_mlp) return;
    MoeWeights& m = l.moe;
    m.fp4_activations.clear();
    for (size_t e = 0; e < m.experts.size(); ++e) {
      const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
      m.fp4_activations.push_back({std::max(input_scale(c, src, ep + "gate_proj.weight"),
                                            input_scale(c, src, ep + "up_proj.weight")),
                                   input_scale(c, src, ep + "down_proj.weight")});
    }
  };
  for (size_t i = 0; i < weights.layers.size(); ++i)
    set_layer(weights.layers[i], layer_prefix(int(i)));
  if (weights.mtp) set_layer(weights.mtp->layer, layer_prefix(c.mtp_layer()));
}

void apply_precision_mode(const ModelConfig& config, PrecisionMode mode, ModelWeights& weights) {
  if (mode == PrecisionMode::kSpark) apply_spark(config, weights);
}

}  // namespace sparkglm
