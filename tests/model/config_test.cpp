#include "engine/model/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

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
      {"hidden_size", -1, "an integer in [1, 65536]"},
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

// The three cases of issue 14: each was accepted and then hung or misbehaved at run time.
TEST(Config, SinkhornIterationsBeyondTheRangeAreRefused) {
  auto j = preset_config("tinyglm").to_json();
  j["hc_sinkhorn_iters"] = 2147483647;
  EXPECT_EQ(error_of(j),
            "invalid config: field `hc_sinkhorn_iters`: expected an integer in [1, 1000], got "
            "2147483647");
}

TEST(Config, AnInfiniteEpsilonOrScaleIsRefused) {
  for (const char* name : {"rms_norm_eps", "hc_eps", "routed_scaling_factor", "swiglu_limit"}) {
    auto j = preset_config("tinyglm").to_json();
    j[name] = 1e39;  // a finite double that a float cannot hold
    const std::string e = error_of(j);
    EXPECT_NE(e.find(std::string("field `") + name + "`: expected a finite number in ("),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("got 1e+39"), std::string::npos) << e;
  }
  auto j = preset_config("tinyglm").to_json();
  j["linear_attn_config"]["gate_lower_bound"] = -1e39;
  EXPECT_NE(error_of(j).find("field `linear_attn_config.gate_lower_bound`: expected a finite "
                             "number in [-100, 0)"),
            std::string::npos)
      << error_of(j);
}

TEST(Config, AnEosIdBeyondInt32IsRefusedNotTruncated) {
  const auto tinyglm = preset_config("tinyglm");
  auto j = tinyglm.to_json();
  j["eos_token_id"] = 4294967297LL;  // 2^32 + 1: was read as 1
  const std::string vocab = std::to_string(tinyglm.vocab_size);
  EXPECT_EQ(error_of(j), "invalid config: field `eos_token_id`: expected ids in [0, vocab_size=" +
                             vocab + "), got 4294967297");
  j["eos_token_id"] = nlohmann::json::array({tinyglm.eos_token_ids[0], 4294967297LL});
  EXPECT_NE(error_of(j).find("got 4294967297"), std::string::npos) << error_of(j);
  j["eos_token_id"] = 18446744073709551615ULL;
  EXPECT_NE(error_of(j).find("field `eos_token_id`"), std::string::npos) << error_of(j);
  j["eos_token_id"] = tinyglm.vocab_size;
  EXPECT_NE(error_of(j).find("vocab_size=" + vocab + ")"), std::string::npos) << error_of(j);
}

// Every ranged field: each preset lies inside, and just outside each end is refused with a message
// naming the field and the range.
TEST(Config, EveryRangedFieldRefusesValuesJustOutsideItsRange) {
  auto set = [](nlohmann::json& j, const std::string& field, const nlohmann::json& v) {
    const size_t dot = field.find('.');
    if (dot == std::string::npos)
      j[field] = v;
    else
      j[field.substr(0, dot)][field.substr(dot + 1)] = v;
  };
  ASSERT_GE(config_ranges().size(), 30u);
  for (const auto& preset : preset_names()) {
    for (const ConfigRange& r : config_ranges()) {
      SCOPED_TRACE(preset + ": " + r.field);
      const nlohmann::json base = preset_config(preset).to_json();
      std::vector<nlohmann::json> outside;
      if (r.integer) {
        outside = {int64_t(r.lo) - 1, int64_t(r.hi) + 1, int64_t(1) << 40};
      } else {
        outside = {r.lo_open ? r.lo : r.lo - 1, r.hi_open ? r.hi : r.hi * 2 + 1, 1e39, -1e39};
      }
      for (const nlohmann::json& v : outside) {
        nlohmann::json j = base;
        set(j, r.field, v);
        const std::string e = error_of(j);
        EXPECT_NE(e.find(std::string("field `") + r.field + "`: expected "), std::string::npos)
            << v << " -> " << e;
        EXPECT_NE(e.find(r.lo_open ? "in (" : "in ["), std::string::npos) << v << " -> " << e;
      }
    }
  }
}

TEST(Config, ValidateChecksTheRangesOfAConfigBuiltInCode) {
  ModelConfig c = preset_config("tinyglm-micro");
  c.hc_sinkhorn_iters = 1 << 30;
  EXPECT_THROW(c.validate(), Error);
  c = preset_config("tinyglm-micro");
  c.hc_eps = INFINITY;
  EXPECT_THROW(c.validate(), Error);
}

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("config_file_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string load_error(const std::string& text) {
    const std::string path = (dir_ / "config.json").string();
    std::ofstream(path, std::ios::binary) << text;
    try {
      ModelConfig::load(path);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig) << e.what();
      return e.message();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(ConfigFile, DeepNestingFailsAtLoadWithANamedError) {
  const std::string path = (dir_ / "config.json").string();
  // A field nested 200,000 deep, after valid fields: a recursive walk of it would overflow.
  std::string text = preset_config("tinyglm").to_json().dump();
  text.pop_back();
  text += ", \"quantization_config\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_EQ(load_error(text), path + ": JSON nested deeper than 16 levels");
  EXPECT_EQ(load_error(std::string(100000, '{')), path + ": JSON nested deeper than 16 levels");
  EXPECT_EQ(load_error(preset_config("tinyglm").to_json().dump()), "");
}

}  // namespace
}  // namespace sparkglm
