#pragma once
// GLM-5.3-Flash's geometry as config.json states it (`model_type: glm5_next`, MODEL.md section 1),
// with parsing, validation and writing. The presets of MODEL.md section 8 live in presets.cpp.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm {

enum class LayerKind { kLinearAttention, kSparseAttention };  // KDA | MLA with the DSA indexer

struct KdaConfig {  // `linear_attn_config`
  int num_heads = 64;
  int head_dim = 128;  // K = V = head_dim; the gate low-rank width is head_dim too
  int short_conv_kernel_size = 4;
  float gate_lower_bound = -5.0f;
};

struct ModelConfig {
  std::string model_type = "glm5_next";
  int hidden_size = 4096;
  int num_hidden_layers = 45;
  std::vector<LayerKind> layer_types;  // one per layer; derived by the 3:1 rule when absent
  int first_k_dense_replace = 3;       // layers [0, k) use the dense MLP
  int intermediate_size = 12288;
  int vocab_size = 154880;
  std::vector<int> eos_token_ids = {154820, 154827, 154829};
  int64_t max_position_embeddings = 1048576;
  float rms_norm_eps = 1e-5f;
  KdaConfig kda;
  // MLA (NoPE)
  int num_attention_heads = 64;
  int q_lora_rank = 1536;
  int kv_lora_rank = 512;
  int qk_nope_head_dim = 256;
  int qk_rope_head_dim = 0;
  int v_head_dim = 256;
  // DSA indexer
  int index_n_heads = 32;
  int index_head_dim = 128;
  int index_topk = 2048;  // tokens; index_topk / index_kpool pools are selected
  int index_kpool = 4;
  // MoE
  int n_routed_experts = 288;
  int num_experts_per_tok = 8;
  int moe_intermediate_size = 2048;
  int n_shared_experts = 1;
  std::string scoring_func = "sigmoid";
  std::string topk_method = "noaux_tc";
  int n_group = 1;
  int topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 2.5f;
  float swiglu_limit = 10.0f;
  // Hyper-connections
  int hc_mult = 4;
  int hc_sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  // MTP
  int num_nextn_predict_layers = 1;

  // Derived quantities.
  LayerKind layer_kind(int layer) const { return layer_types.at(size_t(layer)); }
  bool is_dense_mlp(int layer) const { return layer < first_k_dense_replace; }
  int num_kda_layers() const;
  int num_mla_layers() const;  // main-model MLA layers (the MTP layer is counted separately)
  // Index of `layer` among layers of its kind (its KDA state index or latent-cache index).
  int kind_index(int layer) const;
  int hc_dim() const { return hc_mult * hidden_size; }               // flattened residual
  int hc_mix_count() const { return hc_mult * (2 + hc_mult); }       // 24 for hc_mult 4
  float mla_softmax_scale() const;                                   // 1/sqrt(qk head dim)
  int index_topk_pools() const { return index_topk / index_kpool; }  // 512
  // Layer index of the MTP module (= num_hidden_layers), or -1 without one.
  int mtp_layer() const { return num_nextn_predict_layers > 0 ? num_hidden_layers : -1; }
  bool is_eos(int token) const;

  // Throws Error(kInvalidConfig) naming the first inconsistent field and the value expected.
  void validate() const;
  // Cuts depth to `layers` keeping the 3:1 pattern (layers must be a positive multiple of 4).
  void set_depth(int layers);

  static ModelConfig from_json(const nlohmann::json& j);  // validates
  static ModelConfig load(const std::string& path);       // config.json
  nlohmann::json to_json() const;
  void save(const std::string& path) const;
};

// The range each numeric config.json field must lie in, checked at load (before a value is
// narrowed to its C++ type) and by validate(), with a message naming the field and the range:
// "field `hc_sinkhorn_iters`: expected an integer in [1, 1000], got 2147483647". Every preset
// lies inside; fields that depend on another (eos_token_id < vocab_size) are checked as well.
struct ConfigRange {
  const char* field;  // as config.json names it: "linear_attn_config.head_dim"
  double lo, hi;
  bool integer = true;
  bool lo_open = false, hi_open = false;  // (lo, ...] / [..., hi)
};
const std::vector<ConfigRange>& config_ranges();

// The 3:1 rule: layer i is sparse attention when (i + 1) % 4 == 0.
std::vector<LayerKind> default_layer_types(int num_layers);

// MODEL.md section 8: "glm-5.3-flash", "tinyglm", "tinyglm-micro"; and "tinyglm-wide"
// (docs/trained-tinyglm.md).
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace sparkglm
