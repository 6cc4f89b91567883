#include "engine/model/precision_mode.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/core/error.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/tensor_layout.h"
#include "engine/model/weight_quantizer.h"

namespace sparkglm {
namespace {

constexpr int64_t kNvBlock = 16;

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
  const TensorSource* src = weights.source.get();
  auto convert_layer = [&](LayerWeights& l, const std::string& p) {
    if (l.kind == LayerKind::kLinearAttention) {
      KdaWeights& k = l.kda;
      const std::string a = p + "self_attn.";
      for (auto [w, n] : {std::pair{&k.q_proj, "q_proj"},
                          {&k.k_proj, "k_proj"},
                          {&k.v_proj, "v_proj"},
                          {&k.f_a, "f_a_proj"},
                          {&k.f_b, "f_b_proj"},
                          {&k.b_proj, "b_proj"},
                          {&k.g_a, "g_a_proj"},
                          {&k.g_b, "g_b_proj"},
                          {&k.o_proj, "o_proj"}})
        convert_to_fp4(*w, a + n + ".weight", weights);
    }
    if (l.dense_mlp) return;
    MoeWeights& m = l.moe;
    if (m.shared)
      for (auto [w, n] : {std::pair{&m.shared->gate, "gate_proj"},
                          {&m.shared->up, "up_proj"},
                          {&m.shared->down, "down_proj"}})
        convert_to_fp4(*w, p + "mlp.shared_experts." + n + ".weight", weights);
    m.fp4_activations.clear();
    for (size_t e = 0; e < m.experts.size(); ++e) {
      const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
      m.fp4_activations.push_back({std::max(input_scale(c, src, ep + "gate_proj.weight"),
                                            input_scale(c, src, ep + "up_proj.weight")),
                                   input_scale(c, src, ep + "down_proj.weight")});
    }
  };
  for (size_t i = 0; i < weights.layers.size(); ++i)
    convert_layer(weights.layers[i], layer_prefix(int(i)));
  if (weights.mtp) convert_layer(weights.mtp->layer, layer_prefix(c.mtp_layer()));
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

void apply_precision_mode(const ModelConfig& config, PrecisionMode mode, ModelWeights& weights) {
  if (mode == PrecisionMode::kSpark) apply_spark(config, weights);
}

}  // namespace sparkglm
