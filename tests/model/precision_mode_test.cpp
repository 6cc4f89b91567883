// --precision-mode on the CPU reference (MODEL.md section 7): spark converts KDA and shared-expert
// weights to NVFP4 and gives routed experts their FP4 activation scales; strict changes nothing.
#include "engine/model/precision_mode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/weight_formats.h"
#include "engine/model/weight_quantizer.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

struct Model {
  ModelConfig config = preset_config("tinyglm-micro");
  std::shared_ptr<OwnedTensors> tensors;
  ModelWeights weights;
  Model() {
    ThreadPool pool(2);
    tensors = make_dummy_weights(config, kDefaultDummySeed, pool);
  }
  void bind() { weights = ModelWeights::bind(config, tensors); }
};

// The NVFP4 values of a BF16 checkpoint tensor, through the quantizer and the loader's
// dequantization (a path independent of round_trip_nvfp4).
std::vector<float> nvfp4_of(const TensorSource& src, const std::string& name) {
  const TensorView v = *src.find(name);
  const int64_t rows = v.shape[0], cols = v.shape[1];
  std::vector<float> w(size_t(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, v.data + 2 * i, 2);
    w[i] = bf16_to_f32(h);
  }
  const Nvfp4Weight q = quantize_nvfp4(w.data(), rows, cols, name);
  OwnedTensors out("q");
  std::memcpy(out.add("x.weight", DType::kU8, {rows, cols / 2}), q.packed.data(), q.packed.size());
  std::memcpy(out.add("x.weight_scale", DType::kF8E4M3, {rows, cols / 16}), q.scale.data(),
              q.scale.size());
  std::memcpy(out.add("x.weight_scale_2", DType::kF32, {}), &q.scale_2, 4);
  return dequantize_linear(out, "x.weight", rows, cols);
}

std::vector<float> values(const Linear& w) {
  std::vector<float> out;
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) out.push_back(w.at(r, c));
  return out;
}

TEST(PrecisionMode, SparkConvertsKdaAndSharedExpertWeightsToNvfp4AndNothingElse) {
  Model m;
  m.bind();
  const ModelWeights before = m.weights;  // the same views: Linear is a pointer and a shape
  apply_precision_mode(m.config, PrecisionMode::kSpark, m.weights);
  const LayerWeights& kda = m.weights.layers[0];
  EXPECT_EQ(values(kda.kda.q_proj), nvfp4_of(*m.tensors, "model.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(values(kda.kda.f_b), nvfp4_of(*m.tensors, "model.layers.0.self_attn.f_b_proj.weight"));
  EXPECT_EQ(values(kda.kda.o_proj), nvfp4_of(*m.tensors, "model.layers.0.self_attn.o_proj.weight"));
  EXPECT_NE(values(kda.kda.q_proj), values(before.layers[0].kda.q_proj));
  const LayerWeights& moe = m.weights.layers[1];
  EXPECT_EQ(values(moe.moe.shared->down),
            nvfp4_of(*m.tensors, "model.layers.1.mlp.shared_experts.down_proj.weight"));
  EXPECT_EQ(values(m.weights.mtp->layer.moe.shared->gate),
            nvfp4_of(*m.tensors, "model.layers.4.mlp.shared_experts.gate_proj.weight"));
  // Untouched: MLA, the dense MLP, routed expert weights, the LM head and the embedding.
  const LayerWeights& mla = m.weights.layers[3];
  EXPECT_EQ(mla.mla.q_a.data, before.layers[3].mla.q_a.data);
  EXPECT_EQ(mla.mla.o_proj.data, before.layers[3].mla.o_proj.data);
  EXPECT_EQ(kda.mlp.up.data, before.layers[0].mlp.up.data);
  EXPECT_EQ(moe.moe.experts[2].down.data, before.layers[1].moe.experts[2].down.data);
  EXPECT_EQ(m.weights.lm_head.data, before.lm_head.data);
  EXPECT_EQ(m.weights.embed.data, before.embed.data);
}

TEST(PrecisionMode, RoutedExpertsTakeTheCheckpointsInputScalesOrTheDerivedOnes) {
  Model m;
  const std::string e0 = "model.layers.1.mlp.experts.0.";
  for (auto [proj, s] : {std::pair{"gate_proj", 0.01f}, {"up_proj", 0.02f}, {"down_proj", 0.5f}})
    std::memcpy(m.tensors->add(e0 + proj + ".input_scale", DType::kF32, {}), &s, 4);
  m.bind();
  apply_precision_mode(m.config, PrecisionMode::kSpark, m.weights);
  const auto& scales = m.weights.layers[1].moe.fp4_activations;
  ASSERT_EQ(scales.size(), size_t(m.config.n_routed_experts));
  EXPECT_EQ(scales[0].gate_up, 0.02f);  // the larger of gate's and up's: they read one input
  EXPECT_EQ(scales[0].down, 0.5f);
  EXPECT_EQ(scales[1].gate_up, routed_expert_input_scale(m.config, e0 + "gate_proj.weight"));
  EXPECT_EQ(scales[1].gate_up, std::sqrt(float(m.config.hidden_size)) / 2688.0f);
  EXPECT_EQ(scales[1].down, m.config.swiglu_limit * m.config.swiglu_limit / 2688.0f);
  EXPECT_EQ(m.weights.mtp->layer.moe.fp4_activations.size(), size_t(m.config.n_routed_experts));
  EXPECT_TRUE(m.weights.layers[0].moe.fp4_activations.empty());  // layer 0 is dense
}

TEST(PrecisionMode, StrictChangesNothingAndBadNamesOrScalesAreRefused) {
  Model m;
  const float negative = -1.0f;
  std::memcpy(m.tensors->add("model.layers.2.mlp.experts.0.down_proj.input_scale", DType::kF32, {}),
              &negative, 4);
  m.bind();
  const ModelWeights before = m.weights;
  apply_precision_mode(m.config, PrecisionMode::kStrict, m.weights);
  EXPECT_EQ(m.weights.layers[0].kda.q_proj.data, before.layers[0].kda.q_proj.data);
  EXPECT_TRUE(m.weights.layers[1].moe.fp4_activations.empty());
  try {
    apply_precision_mode(m.config, PrecisionMode::kSpark, m.weights);
    FAIL() << "a negative input_scale was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint);
    EXPECT_NE(std::string(e.what()).find("experts.0.down_proj.input_scale"), std::string::npos);
  }
  EXPECT_EQ(precision_mode_from_name("spark"), PrecisionMode::kSpark);
  EXPECT_THROW(precision_mode_from_name("fast"), Error);
  for (PrecisionMode mode : {PrecisionMode::kStrict, PrecisionMode::kSpark})
    EXPECT_EQ(precision_mode_from_name(precision_mode_name(mode)), mode);
}

}  // namespace
}  // namespace sparkglm
