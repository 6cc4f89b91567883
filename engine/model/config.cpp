#include "engine/model/config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"

namespace sparkglm {

using nlohmann::json;

namespace {

constexpr const char* kLinear = "linear_attention";
constexpr const char* kSparse = "deepseek_sparse_attention";

// `got` is cut short: it may be a whole (bounded, but large) JSON value.
[[noreturn]] void bad(const std::string& field, const std::string& expected,
                      const std::string& got) {
  const std::string shown = got.size() > 80 ? got.substr(0, 77) + "..." : got;
  throw Error(ErrorKind::kInvalidConfig,
              "field `" + field + "`: expected " + expected + ", got " + shown);
}

// The name and the expectation are views taken by value: a `const std::string&` parameter bound to
// a temporary (a literal) makes g++ 13 warn that the returned reference may dangle
// (-Wdangling-reference), though it refers into `j`.
const json& field(const json& j, std::string_view name, std::string_view expected) {
  auto it = j.find(std::string(name));
  if (it == j.end())
    bad(std::string(name), std::string(expected), "nothing (the field is missing)");
  return *it;
}

std::string shortest(double x) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, res.ptr);
}

std::string range_text(const ConfigRange& r) {
  return std::string(r.lo_open ? "(" : "[") + shortest(r.lo) + ", " + shortest(r.hi) +
         (r.hi_open ? ")" : "]");
}

const ConfigRange& range_of(std::string_view name) {
  for (const ConfigRange& r : config_ranges())
    if (name == r.field) return r;
  assert_failed("a range for every config field", __FILE__, __LINE__, std::string(name));
}

bool in_range(const ConfigRange& r, double v) {
  return std::isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) &&
         (r.hi_open ? v < r.hi : v <= r.hi);
}

// Integers are compared before narrowing to int, so 2^32+1 is out of range rather than 1.
void check_integer(std::string_view name, int64_t v) {
  const ConfigRange& r = range_of(name);
  if (!in_range(r, double(v)))
    bad(std::string(name), "an integer in " + range_text(r), std::to_string(v));
}

void check_real(std::string_view name, double v) {
  const ConfigRange& r = range_of(name);
  if (!in_range(r, v)) bad(std::string(name), "a finite number in " + range_text(r), shortest(v));
}

void check_eos(int64_t id, int vocab_size) {
  if (id < 0 || id >= vocab_size)
    bad("eos_token_id", "ids in [0, vocab_size=" + std::to_string(vocab_size) + ")",
        std::to_string(id));
}

// The value as int64, whatever JSON integer it is (an unsigned one above 2^63 is out of range).
int64_t integer_value(const json& v, const std::string& name) {
  if (!v.is_number_integer()) bad(name, "an integer", v.dump());
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    bad(name, "an integer below 2^63", v.dump());
  return v.get<int64_t>();
}

int64_t get_integer(const json& j, const std::string& name, const std::string& prefix = "") {
  const int64_t x = integer_value(field(j, name, "an integer"), prefix + name);
  check_integer(prefix + name, x);
  return x;
}

int get_int(const json& j, const std::string& name, const std::string& prefix = "") {
  return int(get_integer(j, name, prefix));  // every int field's range lies within int32
}

// Read as a double and range-checked before narrowing: 1e39 is out of range, not a float inf.
float get_float(const json& j, const std::string& name, const std::string& prefix = "") {
  const json& v = field(j, name, "a number");
  if (!v.is_number()) bad(prefix + name, "a number", v.dump());
  check_real(prefix + name, v.get<double>());
  return v.get<float>();
}

std::string get_string(const json& j, const std::string& name) {
  const json& v = field(j, name, "a string");
  if (!v.is_string()) bad(name, "a string", v.dump());
  return v.get<std::string>();
}

bool get_bool(const json& j, const std::string& name) {
  const json& v = field(j, name, "true or false");
  if (!v.is_boolean()) bad(name, "true or false", v.dump());
  return v.get<bool>();
}

// A float written as the shortest decimal that reads back to it ("1e-05", not 9.99999974e-06).
double json_number(float f) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
}

}  // namespace

std::vector<LayerKind> default_layer_types(int num_layers) {
  std::vector<LayerKind> types(size_t(std::max(num_layers, 0)));
  for (int i = 0; i < num_layers; ++i)
    types[size_t(i)] = (i + 1) % 4 == 0 ? LayerKind::kSparseAttention : LayerKind::kLinearAttention;
  return types;
}

int ModelConfig::num_kda_layers() const {
  int n = 0;
  for (auto t : layer_types) n += t == LayerKind::kLinearAttention;
  return n;
}

int ModelConfig::num_mla_layers() const {
  return int(layer_types.size()) - num_kda_layers();
}

int ModelConfig::kind_index(int layer) const {
  if (layer == mtp_layer()) return num_mla_layers();  // the MTP layer's cache follows the main ones
  int n = 0;
  for (int i = 0; i < layer; ++i) n += layer_types[size_t(i)] == layer_types[size_t(layer)];
  return n;
}

float ModelConfig::mla_softmax_scale() const {
  return 1.0f / std::sqrt(float(qk_nope_head_dim + qk_rope_head_dim));
}

bool ModelConfig::is_eos(int token) const {
  for (int e : eos_token_ids)
    if (e == token) return true;
  return false;
}

const std::vector<ConfigRange>& config_ranges() {
  // Integers first, then reals. Sizes are bounded to keep every derived product (hc_mult x
  // hidden_size, experts x moe_intermediate_size x hidden_size) far from overflow and every
  // loop bound (hc_sinkhorn_iters) short; reals must be finite so that inf never reaches a kernel.
  static const std::vector<ConfigRange> ranges = {
      {"hidden_size", 1, 65536},
      {"num_hidden_layers", 1, 1024},
      {"first_k_dense_replace", 0, 1024},  // and at most num_hidden_layers
      {"intermediate_size", 1, 1 << 20},
      {"vocab_size", 1, 1 << 24},
      {"max_position_embeddings", 1, double(int64_t(1) << 30)},
      {"linear_attn_config.num_heads", 1, 1024},
      {"linear_attn_config.head_dim", 1, 1024},
      {"linear_attn_config.short_conv_kernel_size", 1, 64},
      {"num_attention_heads", 1, 1024},
      {"q_lora_rank", 1, 65536},
      {"kv_lora_rank", 1, 65536},
      {"qk_nope_head_dim", 1, 1024},
      {"qk_rope_head_dim", 0, 1024},  // and 0 for this model (NoPE)
      {"v_head_dim", 1, 1024},
      {"index_n_heads", 1, 1024},
      {"index_head_dim", 1, 1024},
      {"index_topk", 1, 1 << 20},  // and a multiple of index_kpool
      {"index_kpool", 1, 1024},
      {"n_routed_experts", 1, 4096},
      {"num_experts_per_tok", 1, 4096},  // and at most n_routed_experts
      {"moe_intermediate_size", 1, 1 << 20},
      {"n_shared_experts", 0, 64},
      {"n_group", 1, 1},  // grouped routing is not implemented
      {"topk_group", 1, 1},
      {"hc_mult", 1, 16},
      {"hc_sinkhorn_iters", 1, 1000},
      {"num_nextn_predict_layers", 0, 1},
      {"rms_norm_eps", 0, 0.1, /*integer=*/false, /*lo_open=*/true},
      {"linear_attn_config.gate_lower_bound", -100, 0, false, false, /*hi_open=*/true},
      {"routed_scaling_factor", 0, 1000, false, true},
      {"swiglu_limit", 0, 1e6, false, true},
      {"hc_eps", 0, 0.1, false, true},
  };
  return ranges;
}

void ModelConfig::validate() const {
  if (model_type != "glm5_next") bad("model_type", "\"glm5_next\"", "\"" + model_type + "\"");
  const std::pair<const char*, int64_t> integers[] = {
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_hidden_layers},
      {"first_k_dense_replace", first_k_dense_replace},
      {"intermediate_size", intermediate_size},
      {"vocab_size", vocab_size},
      {"max_position_embeddings", max_position_embeddings},
      {"linear_attn_config.num_heads", kda.num_heads},
      {"linear_attn_config.head_dim", kda.head_dim},
      {"linear_attn_config.short_conv_kernel_size", kda.short_conv_kernel_size},
      {"num_attention_heads", num_attention_heads},
      {"q_lora_rank", q_lora_rank},
      {"kv_lora_rank", kv_lora_rank},
      {"qk_nope_head_dim", qk_nope_head_dim},
      {"qk_rope_head_dim", qk_rope_head_dim},
      {"v_head_dim", v_head_dim},
      {"index_n_heads", index_n_heads},
      {"index_head_dim", index_head_dim},
      {"index_topk", index_topk},
      {"index_kpool", index_kpool},
      {"n_routed_experts", n_routed_experts},
      {"num_experts_per_tok", num_experts_per_tok},
      {"moe_intermediate_size", moe_intermediate_size},
      {"n_shared_experts", n_shared_experts},
      {"n_group", n_group},
      {"topk_group", topk_group},
      {"hc_mult", hc_mult},
      {"hc_sinkhorn_iters", hc_sinkhorn_iters},
      {"num_nextn_predict_layers", num_nextn_predict_layers},
  };
  for (const auto& [name, v] : integers) check_integer(name, v);
  const std::pair<const char*, float> reals[] = {
      {"rms_norm_eps", rms_norm_eps},
      {"linear_attn_config.gate_lower_bound", kda.gate_lower_bound},
      {"routed_scaling_factor", routed_scaling_factor},
      {"swiglu_limit", swiglu_limit},
      {"hc_eps", hc_eps},
  };
  for (const auto& [name, v] : reals) check_real(name, double(v));
  // What depends on another field.
  if (int(layer_types.size()) != num_hidden_layers)
    bad("layer_types", std::to_string(num_hidden_layers) + " entries (num_hidden_layers)",
        std::to_string(layer_types.size()) + " entries");
  if (first_k_dense_replace > num_hidden_layers)
    bad("first_k_dense_replace", "0.." + std::to_string(num_hidden_layers),
        std::to_string(first_k_dense_replace));
  if (eos_token_ids.empty()) bad("eos_token_id", "at least one token id", "[]");
  for (int e : eos_token_ids) check_eos(e, vocab_size);
  if (qk_rope_head_dim != 0)
    bad("qk_rope_head_dim", "0 (GLM-5.3-Flash's MLA is NoPE)", std::to_string(qk_rope_head_dim));
  if (index_topk % index_kpool != 0)
    bad("index_topk", "a multiple of index_kpool=" + std::to_string(index_kpool),
        std::to_string(index_topk));
  if (num_experts_per_tok > n_routed_experts)
    bad("num_experts_per_tok", "1.." + std::to_string(n_routed_experts) + " (n_routed_experts)",
        std::to_string(num_experts_per_tok));
  if (scoring_func != "sigmoid") bad("scoring_func", "\"sigmoid\"", "\"" + scoring_func + "\"");
  if (topk_method != "noaux_tc") bad("topk_method", "\"noaux_tc\"", "\"" + topk_method + "\"");
  if (num_mla_layers() == 0 && num_nextn_predict_layers == 0 && num_kda_layers() == 0)
    bad("layer_types", "at least one layer", "none");
}

void ModelConfig::set_depth(int layers) {
  if (layers <= 0 || layers % 4 != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--num-layers: expected a positive multiple of 4 (the 3:1 KDA:MLA pattern), got " +
                    std::to_string(layers));
  num_hidden_layers = layers;
  layer_types = default_layer_types(layers);
  first_k_dense_replace = std::min(first_k_dense_replace, layers);
}

ModelConfig ModelConfig::from_json(const json& j) {
  if (!j.is_object()) bad("(root)", "a JSON object", j.type_name());
  ModelConfig c;
  c.model_type = get_string(j, "model_type");
  if (c.model_type != "glm5_next") bad("model_type", "\"glm5_next\"", "\"" + c.model_type + "\"");
  c.hidden_size = get_int(j, "hidden_size");
  c.num_hidden_layers = get_int(j, "num_hidden_layers");
  if (auto it = j.find("layer_types"); it != j.end()) {
    if (!it->is_array()) bad("layer_types", "a list of layer kinds", it->dump());
    for (const auto& t : *it) {
      if (t == kLinear) {
        c.layer_types.push_back(LayerKind::kLinearAttention);
      } else if (t == kSparse) {
        c.layer_types.push_back(LayerKind::kSparseAttention);
      } else {
        bad("layer_types", std::string("\"") + kLinear + "\" or \"" + kSparse + "\"", t.dump());
      }
    }
  } else {
    c.layer_types = default_layer_types(std::max(c.num_hidden_layers, 0));
  }
  if (auto it = j.find("first_k_dense_replace"); it != j.end()) {
    c.first_k_dense_replace = get_int(j, "first_k_dense_replace");
  } else if (auto m = j.find("mlp_only_layers"); m != j.end()) {
    // Only a leading run of dense layers is supported: [0, 1, ..., k-1].
    if (!m->is_array()) bad("mlp_only_layers", "a list of layer indices", m->dump());
    for (size_t i = 0; i < m->size(); ++i)
      if (!(*m)[i].is_number_integer() || (*m)[i].get<int64_t>() != int64_t(i))
        bad("mlp_only_layers", "a leading run [0, 1, ..., k-1]", m->dump());
    c.first_k_dense_replace = int(m->size());
  } else {
    bad("first_k_dense_replace", "an integer (or mlp_only_layers)",
        "nothing (the field is missing)");
  }
  c.intermediate_size = get_int(j, "intermediate_size");
  c.vocab_size = get_int(j, "vocab_size");
  const json& eos = field(j, "eos_token_id", "an integer or a list of integers");
  c.eos_token_ids.clear();
  auto add_eos = [&](const json& e) {
    const int64_t id = integer_value(e, "eos_token_id");
    check_eos(id, c.vocab_size);  // before narrowing: 2^32+1 must not become 1
    c.eos_token_ids.push_back(int(id));
  };
  if (eos.is_number_integer()) {
    add_eos(eos);
  } else if (eos.is_array()) {
    for (const auto& e : eos) {
      if (!e.is_number_integer()) bad("eos_token_id", "integers", eos.dump());
      add_eos(e);
    }
  } else {
    bad("eos_token_id", "an integer or a list of integers", eos.dump());
  }
  c.max_position_embeddings = get_integer(j, "max_position_embeddings");
  c.rms_norm_eps = get_float(j, "rms_norm_eps");
  const json& la = field(j, "linear_attn_config", "an object");
  if (!la.is_object()) bad("linear_attn_config", "an object", la.dump());
  c.kda.num_heads = get_int(la, "num_heads", "linear_attn_config.");
  c.kda.head_dim = get_int(la, "head_dim", "linear_attn_config.");
  c.kda.short_conv_kernel_size = get_int(la, "short_conv_kernel_size", "linear_attn_config.");
  c.kda.gate_lower_bound = get_float(la, "gate_lower_bound", "linear_attn_config.");
  c.num_attention_heads = get_int(j, "num_attention_heads");
  c.q_lora_rank = get_int(j, "q_lora_rank");
  c.kv_lora_rank = get_int(j, "kv_lora_rank");
  c.qk_nope_head_dim = get_int(j, "qk_nope_head_dim");
  c.qk_rope_head_dim = get_int(j, "qk_rope_head_dim");
  c.v_head_dim = get_int(j, "v_head_dim");
  c.index_n_heads = get_int(j, "index_n_heads");
  c.index_head_dim = get_int(j, "index_head_dim");
  c.index_topk = get_int(j, "index_topk");
  c.index_kpool = get_int(j, "index_kpool");
  c.n_routed_experts = get_int(j, "n_routed_experts");
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok");
  c.moe_intermediate_size = get_int(j, "moe_intermediate_size");
  c.n_shared_experts = get_int(j, "n_shared_experts");
  c.scoring_func = get_string(j, "scoring_func");
  c.topk_method = get_string(j, "topk_method");
  c.n_group = get_int(j, "n_group");
  c.topk_group = get_int(j, "topk_group");
  c.norm_topk_prob = get_bool(j, "norm_topk_prob");
  c.routed_scaling_factor = get_float(j, "routed_scaling_factor");
  c.swiglu_limit = get_float(j, "swiglu_limit");
  c.hc_mult = get_int(j, "hc_mult");
  c.hc_sinkhorn_iters = get_int(j, "hc_sinkhorn_iters");
  c.hc_eps = get_float(j, "hc_eps");
  c.num_nextn_predict_layers = get_int(j, "num_nextn_predict_layers");
  c.validate();
  return c;
}

json ModelConfig::to_json() const {
  json types = json::array();
  for (auto t : layer_types) types.push_back(t == LayerKind::kLinearAttention ? kLinear : kSparse);
  return json{
      {"architectures", {"Glm5NextForCausalLM"}},
      {"model_type", model_type},
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_hidden_layers},
      {"layer_types", types},
      {"first_k_dense_replace", first_k_dense_replace},
      {"intermediate_size", intermediate_size},
      {"vocab_size", vocab_size},
      {"eos_token_id", eos_token_ids},
      {"max_position_embeddings", max_position_embeddings},
      {"rms_norm_eps", json_number(rms_norm_eps)},
      {"linear_attn_config",
       {{"num_heads", kda.num_heads},
        {"head_dim", kda.head_dim},
        {"short_conv_kernel_size", kda.short_conv_kernel_size},
        {"gate_lower_bound", json_number(kda.gate_lower_bound)}}},
      {"num_attention_heads", num_attention_heads},
      {"q_lora_rank", q_lora_rank},
      {"kv_lora_rank", kv_lora_rank},
      {"qk_nope_head_dim", qk_nope_head_dim},
      {"qk_rope_head_dim", qk_rope_head_dim},
      {"v_head_dim", v_head_dim},
      {"index_n_heads", index_n_heads},
      {"index_head_dim", index_head_dim},
      {"index_topk", index_topk},
      {"index_kpool", index_kpool},
      {"n_routed_experts", n_routed_experts},
      {"num_experts_per_tok", num_experts_per_tok},
      {"moe_intermediate_size", moe_intermediate_size},
      {"n_shared_experts", n_shared_experts},
      {"scoring_func", scoring_func},
      {"topk_method", topk_method},
      {"n_group", n_group},
      {"topk_group", topk_group},
      {"norm_topk_prob", norm_topk_prob},
      {"routed_scaling_factor", json_number(routed_scaling_factor)},
      {"swiglu_limit", json_number(swiglu_limit)},
      {"hc_mult", hc_mult},
      {"hc_sinkhorn_iters", hc_sinkhorn_iters},
      {"hc_eps", json_number(hc_eps)},
      {"num_nextn_predict_layers", num_nextn_predict_layers},
      {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"},
  };
}

ModelConfig ModelConfig::load(const std::string& path) {
  const json j = parse_json_file(path, ErrorKind::kInvalidConfig, json_limits::kModelConfig);
  try {
    return from_json(j);
  } catch (const Error& e) {
    throw Error(e.kind(), path + ": " + e.message());
  }
}

void ModelConfig::save(const std::string& path) const {
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kIo, "cannot write " + path);
  out << to_json().dump(2) << "\n";
  if (!out) throw Error(ErrorKind::kIo, "failed writing " + path);
}

}  // namespace sparkglm
