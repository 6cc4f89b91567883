#include "engine/model/tensor_layout.h"

#include <cmath>

namespace sparkglm {

namespace {

constexpr DummyInit kOnes{1.0f, 0.0f};

// Variance 1/fan_in: uniform on [-a, a] has variance a^2/3.
DummyInit fan_in(int64_t k) {
  return {0.0f, std::sqrt(3.0f / float(k))};
}

class LayoutBuilder {
 public:
  explicit LayoutBuilder(std::vector<TensorSpec>& out) : out_(out) {}
  void linear(const std::string& name, int64_t rows, int64_t cols) {
    out_.push_back({name, {rows, cols}, DType::kBF16, fan_in(cols)});
  }
  void f32(const std::string& name, std::vector<int64_t> shape, DummyInit init) {
    out_.push_back({name, std::move(shape), DType::kF32, init});
  }
  void norm(const std::string& name, int64_t n) { f32(name, {n}, kOnes); }

 private:
  std::vector<TensorSpec>& out_;
};

void add_hc_site(LayoutBuilder& b, const std::string& p, const std::string& site,
                 const ModelConfig& c) {
  b.f32(p + "hc_" + site + "_fn", {c.hc_mix_count(), c.hc_dim()}, fan_in(c.hc_dim()));
  b.f32(p + "hc_" + site + "_base", {c.hc_mix_count()}, {0.0f, 0.5f});
  b.f32(p + "hc_" + site + "_scale", {3}, {0.5f, 0.25f});
}

void add_kda(LayoutBuilder& b, const std::string& p, const ModelConfig& c) {
  const int64_t h = c.hidden_size, nh = c.kda.num_heads, d = c.kda.head_dim, hd = nh * d;
  const int64_t taps = c.kda.short_conv_kernel_size;
  const std::string a = p + "self_attn.";
  b.linear(a + "q_proj.weight", hd, h);
  b.linear(a + "k_proj.weight", hd, h);
  b.linear(a + "v_proj.weight", hd, h);
  b.f32(a + "q_conv1d.weight", {hd, taps}, fan_in(taps));
  b.f32(a + "k_conv1d.weight", {hd, taps}, fan_in(taps));
  b.f32(a + "v_conv1d.weight", {hd, taps}, fan_in(taps));
  b.linear(a + "f_a_proj.weight", d, h);
  b.linear(a + "f_b_proj.weight", hd, d);
  b.f32(a + "A_log", {nh}, {0.0f, 1.0f});
  b.f32(a + "dt_bias", {hd}, {0.0f, 1.0f});
  b.linear(a + "b_proj.weight", nh, h);
  b.linear(a + "g_a_proj.weight", d, h);
  b.linear(a + "g_b_proj.weight", hd, d);
  b.norm(a + "o_norm.weight", d);
  b.linear(a + "o_proj.weight", h, hd);
}

void add_mla(LayoutBuilder& b, const std::string& p, const ModelConfig& c) {
  const int64_t h = c.hidden_size, nh = c.num_attention_heads;
  const std::string a = p + "self_attn.";
  b.linear(a + "q_a_proj.weight", c.q_lora_rank, h);
  b.norm(a + "q_a_layernorm.weight", c.q_lora_rank);
  b.linear(a + "q_b_proj.weight", nh * c.qk_nope_head_dim, c.q_lora_rank);
  b.linear(a + "kv_a_proj_with_mqa.weight", c.kv_lora_rank, h);
  b.norm(a + "kv_a_layernorm.weight", c.kv_lora_rank);
  b.linear(a + "kv_b_proj.weight", nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
  b.linear(a + "o_proj.weight", h, nh * c.v_head_dim);
  const std::string ix = a + "indexer.";
  b.linear(ix + "wq_b.weight", int64_t(c.index_n_heads) * c.index_head_dim, c.q_lora_rank);
  b.linear(ix + "wk.weight", c.index_head_dim, h);
  b.norm(ix + "k_norm.weight", c.index_head_dim);
  b.f32(ix + "k_norm.bias", {c.index_head_dim}, {0.0f, 0.1f});
  b.linear(ix + "weights_proj.weight", c.index_n_heads, h);
  b.linear(ix + "kpool_gate.weight", 1, h);
  b.f32(ix + "kpool_compress_ape", {c.index_kpool}, {0.0f, 0.5f});
}

void add_mlp(LayoutBuilder& b, const std::string& p, const ModelConfig& c, bool dense) {
  const int64_t h = c.hidden_size;
  const std::string m = p + "mlp.";
  auto swiglu = [&](const std::string& q, int64_t width) {
    b.linear(q + "gate_proj.weight", width, h);
    b.linear(q + "up_proj.weight", width, h);
    b.linear(q + "down_proj.weight", h, width);
  };
  if (dense) {
    swiglu(m, c.intermediate_size);
    return;
  }
  b.f32(m + "gate.weight", {c.n_routed_experts, h}, fan_in(h));
  b.f32(m + "gate.e_score_correction_bias", {c.n_routed_experts}, {0.0f, 0.05f});
  for (int e = 0; e < c.n_routed_experts; ++e)
    swiglu(m + "experts." + std::to_string(e) + ".", c.moe_intermediate_size);
  if (c.n_shared_experts > 0)
    swiglu(m + "shared_experts.", int64_t(c.moe_intermediate_size) * c.n_shared_experts);
}

}  // namespace

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string layer_prefix(int layer) {
  return "model.layers." + std::to_string(layer) + ".";
}

std::vector<TensorSpec> checkpoint_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  LayoutBuilder b(out);
  const int64_t h = c.hidden_size;
  out.push_back(
      {"model.embed_tokens.weight", {c.vocab_size, h}, DType::kBF16, {0.0f, std::sqrt(3.0f)}});
  b.norm("model.norm.weight", h);
  b.linear("lm_head.weight", c.vocab_size, h);
  b.f32("model.hc_head_fn", {c.hc_mult, c.hc_dim()}, fan_in(c.hc_dim()));
  b.f32("model.hc_head_base", {c.hc_mult}, {0.0f, 0.5f});
  b.f32("model.hc_head_scale", {1}, {0.5f, 0.25f});
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = layer_prefix(i);
    b.norm(p + "input_layernorm.weight", h);
    b.norm(p + "post_attention_layernorm.weight", h);
    add_hc_site(b, p, "attn", c);
    add_hc_site(b, p, "ffn", c);
    if (c.layer_kind(i) == LayerKind::kLinearAttention) {
      add_kda(b, p, c);
    } else {
      add_mla(b, p, c);
    }
    add_mlp(b, p, c, c.is_dense_mlp(i));
  }
  if (c.mtp_layer() >= 0) {
    const std::string p = layer_prefix(c.mtp_layer());
    b.norm(p + "enorm.weight", h);
    b.norm(p + "hnorm.weight", h);
    b.linear(p + "eh_proj.weight", h, 2 * h);
    b.norm(p + "shared_head.norm.weight", h);
    b.norm(p + "input_layernorm.weight", h);
    b.norm(p + "post_attention_layernorm.weight", h);
    add_mla(b, p, c);
    add_mlp(b, p, c, /*dense=*/false);
  }
  return out;
}

}  // namespace sparkglm
