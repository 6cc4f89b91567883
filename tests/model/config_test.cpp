#include "engine/model/config.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

std::string error_of(const nlohmann::json& j) {
  try {
    ModelConfig::from_json(j);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig);
    return e.what();
  }
  return "";
}

TEST(Config, ProductionPresetHasTheDocumentedGeometry) {
  const ModelConfig c = preset_config("glm-5.3-flash");
  EXPECT_EQ(c.num_hidden_layers, 45);
  EXPECT_EQ(c.num_kda_layers(), 34);
  EXPECT_EQ(c.num_mla_layers(), 11);
  EXPECT_EQ(c.layer_kind(3), LayerKind::kSparseAttention);
  EXPECT_EQ(c.layer_kind(43), LayerKind::kSparseAttention);
  EXPECT_EQ(c.layer_kind(44), LayerKind::kLinearAttention);
  EXPECT_FLOAT_EQ(c.mla_softmax_scale(), 0.0625f);
  EXPECT_EQ(c.index_topk_pools(), 512);
  EXPECT_EQ(c.hc_mix_count(), 24);
  EXPECT_EQ(c.mtp_layer(), 45);
  // KDA state per sequence: 34 layers x 64 heads x 128 x 128 x 4 bytes.
  EXPECT_EQ(int64_t(c.num_kda_layers()) * c.kda.num_heads * c.kda.head_dim * c.kda.head_dim * 4,
            142606336);
}

TEST(Config, TinyPresetsKeepTheStructure) {
  const ModelConfig t = preset_config("tinyglm");
  EXPECT_EQ(t.num_hidden_layers, 4);
  EXPECT_EQ(t.hidden_size, 4096);
  EXPECT_EQ(t.n_routed_experts, 16);
  EXPECT_EQ(t.num_experts_per_tok, 8);
  EXPECT_TRUE(t.is_dense_mlp(0));
  EXPECT_FALSE(t.is_dense_mlp(1));
  EXPECT_EQ(t.layer_kind(3), LayerKind::kSparseAttention);
  const ModelConfig m = preset_config("tinyglm-micro");
  EXPECT_EQ(m.hidden_size, 256);
  EXPECT_EQ(m.index_topk, 16);
  EXPECT_EQ(m.num_experts_per_tok, 2);
  EXPECT_EQ(m.mtp_layer(), 4);
}

TEST(Config, JsonRoundTripsEveryPreset) {
  for (const auto& name : preset_names()) {
    const ModelConfig c = preset_config(name);
    const ModelConfig back = ModelConfig::from_json(c.to_json());
    EXPECT_EQ(back.to_json(), c.to_json()) << name;
  }
}

TEST(Config, MissingFieldIsNamed) {
  auto j = preset_config("tinyglm").to_json();
  j.erase("kv_lora_rank");
  const std::string e = error_of(j);
  EXPECT_NE(e.find("kv_lora_rank"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
}

TEST(Config, InconsistentFieldsNameTheFieldAndTheExpectedValue) {
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* expected;
  };
  const Case cases[] = {
      {"model_type", "llama", "glm5_next"},
      {"qk_rope_head_dim", 64, "0"},
      {"index_topk", 2047, "multiple of index_kpool"},
      {"num_experts_per_tok", 17, "1..16"},
      {"scoring_func", "softmax", "sigmoid"},
      {"hidden_size", -1, "positive"},
      {"eos_token_id", 99999, "vocab_size"},
      {"layer_types", nlohmann::json::array({"linear_attention"}), "4 entries"},
      {"hc_mult", "four", "integer"},
  };
  for (const Case& c : cases) {
    auto j = preset_config("tinyglm").to_json();
    j[c.field] = c.value;
    const std::string e = error_of(j);
    EXPECT_NE(e.find(c.field), std::string::npos) << c.field << ": " << e;
    EXPECT_NE(e.find(c.expected), std::string::npos) << c.field << ": " << e;
  }
}

TEST(Config, DepthOverrideKeepsTheThreeToOnePattern) {
  ModelConfig c = preset_config("glm-5.3-flash");
  c.set_depth(8);
  EXPECT_EQ(c.num_kda_layers(), 6);
  EXPECT_EQ(c.num_mla_layers(), 2);
  EXPECT_EQ(c.layer_kind(7), LayerKind::kSparseAttention);
  EXPECT_EQ(c.mtp_layer(), 8);
  EXPECT_NO_THROW(c.validate());
  EXPECT_THROW(c.set_depth(6), Error);
}

}  // namespace
}  // namespace sparkglm
