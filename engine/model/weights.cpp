#include "engine/model/weights.h"

#include <cstring>
#include <set>

#include "engine/core/error.h"
#include "engine/model/tensor_layout.h"
#include "engine/model/weight_formats.h"

namespace sparkglm {

namespace {

[[noreturn]] void bad_tensor(const std::string& name, const std::string& what) {
  throw Error(ErrorKind::kInvalidCheckpoint, "tensor `" + name + "`: " + what);
}

// Binds tensors by name, converting where the CPU backend needs another dtype, and records which
// names were used so that leftovers can be reported as unknown.
class Binder {
 public:
  Binder(const TensorSource& src, ModelWeights& out, ModelWeights::Quantized quantized)
      : src_(src), out_(out), quantized_(quantized) {}

  TensorView require(const std::string& name, const std::vector<int64_t>& shape) {
    auto view = src_.find(name);
    if (!view)
      bad_tensor(name, "missing from the checkpoint (expected shape " + shape_string(shape) + ")");
    used_.insert(name);
    if (view->shape != shape)
      bad_tensor(name, "shape " + shape_string(view->shape) +
                           " does not match the config, expected " + shape_string(shape));
    return *view;
  }

  // A projection [rows, cols]: BF16 and F32 are used in place, other formats are dequantized.
  Linear linear(const std::string& name, int64_t rows, int64_t cols) {
    auto view = src_.find(name);
    if (!view)
      bad_tensor(name,
                 "missing from the checkpoint (expected shape " + shape_string({rows, cols}) + ")");
    used_.insert(name);
    for (const char* aux : {"_scale_inv", "_scale", "_scale_2"}) used_.insert(name + aux);
    used_.insert(name.substr(0, name.size() - std::string("weight").size()) + "input_scale");
    // Zero-copy only when the data is aligned for its type: safetensors files written by other
    // tools pack tensors back to back, so an offset may be odd.
    const bool aligned =
        reinterpret_cast<uintptr_t>(view->data) % size_t(dtype_size(view->dtype)) == 0;
    if ((view->dtype == DType::kBF16 || view->dtype == DType::kF32) && aligned) {
      if (view->shape != std::vector<int64_t>{rows, cols})
        bad_tensor(name, "shape " + shape_string(view->shape) +
                             " does not match the config, expected " + shape_string({rows, cols}));
      return Linear{view->dtype, rows, cols, view->data};
    }
    const bool stored_quantized = view->dtype == DType::kF8E4M3 || view->dtype == DType::kU8;
    if (stored_quantized && quantized_ == ModelWeights::Quantized::kKeep)
      return stored_linear(src_, name, rows, cols);
    out_.owned.push_back(dequantize_linear(src_, name, rows, cols));
    return Linear{DType::kF32, rows, cols, out_.owned.back().data()};
  }

  // An FP32 vector or matrix (norms, mHC, router, biases), converted from BF16/F16 if stored so.
  const float* f32(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorView v = require(name, shape);
    const bool aligned = reinterpret_cast<uintptr_t>(v.data) % alignof(float) == 0;
    if (v.dtype == DType::kF32 && aligned) return reinterpret_cast<const float*>(v.data);
    const int64_t n = v.numel();
    std::vector<float> converted(static_cast<size_t>(n));
    auto half = [&](int64_t i) {  // memcpy: the data may be unaligned
      uint16_t h;
      std::memcpy(&h, v.data + 2 * i, 2);
      return h;
    };
    if (v.dtype == DType::kF32) {
      std::memcpy(converted.data(), v.data, size_t(n) * sizeof(float));
    } else if (v.dtype == DType::kBF16) {
      for (int64_t i = 0; i < n; ++i) converted[size_t(i)] = bf16_to_f32(half(i));
    } else if (v.dtype == DType::kF16) {
      for (int64_t i = 0; i < n; ++i) converted[size_t(i)] = f16_to_f32(half(i));
    } else {
      bad_tensor(name, "dtype " + std::string(dtype_name(v.dtype)) +
                           " cannot hold this tensor, expected F32, BF16 or F16");
    }
    out_.owned.push_back(std::move(converted));
    return out_.owned.back().data();
  }

  void check_no_unknown() const {
    for (const auto& name : src_.names())
      if (!used_.count(name))
        bad_tensor(name, "unknown to this config (no layer of the model uses it)");
  }

 private:
  const TensorSource& src_;
  ModelWeights& out_;
  ModelWeights::Quantized quantized_;
  std::set<std::string> used_;
};

HcSite bind_hc_site(Binder& b, const ModelConfig& c, const std::string& p,
                    const std::string& site) {
  return HcSite{b.f32(p + "hc_" + site + "_fn", {c.hc_mix_count(), c.hc_dim()}),
                b.f32(p + "hc_" + site + "_base", {c.hc_mix_count()}),
                b.f32(p + "hc_" + site + "_scale", {3})};
}

KdaWeights bind_kda(Binder& b, const ModelConfig& c, const std::string& p) {
  const int64_t d = c.hidden_size, nh = c.kda.num_heads, hd = c.kda.head_dim, width = nh * hd;
  const int64_t taps = c.kda.short_conv_kernel_size;
  const std::string a = p + "self_attn.";
  KdaWeights w;
  w.q_proj = b.linear(a + "q_proj.weight", width, d);
  w.k_proj = b.linear(a + "k_proj.weight", width, d);
  w.v_proj = b.linear(a + "v_proj.weight", width, d);
  w.q_conv = b.f32(a + "q_conv1d.weight", {width, taps});
  w.k_conv = b.f32(a + "k_conv1d.weight", {width, taps});
  w.v_conv = b.f32(a + "v_conv1d.weight", {width, taps});
  w.f_a = b.linear(a + "f_a_proj.weight", hd, d);
  w.f_b = b.linear(a + "f_b_proj.weight", width, hd);
  w.a_log = b.f32(a + "A_log", {nh});
  w.dt_bias = b.f32(a + "dt_bias", {width});
  w.b_proj = b.linear(a + "b_proj.weight", nh, d);
  w.g_a = b.linear(a + "g_a_proj.weight", hd, d);
  w.g_b = b.linear(a + "g_b_proj.weight", width, hd);
  w.o_norm = b.f32(a + "o_norm.weight", {hd});
  w.o_proj = b.linear(a + "o_proj.weight", d, width);
  return w;
}

MlaWeights bind_mla(Binder& b, const ModelConfig& c, const std::string& p) {
  const int64_t d = c.hidden_size, nh = c.num_attention_heads;
  const std::string a = p + "self_attn.";
  MlaWeights w;
  w.q_a = b.linear(a + "q_a_proj.weight", c.q_lora_rank, d);
  w.q_a_norm = b.f32(a + "q_a_layernorm.weight", {c.q_lora_rank});
  w.q_b = b.linear(a + "q_b_proj.weight", nh * c.qk_nope_head_dim, c.q_lora_rank);
  w.kv_a = b.linear(a + "kv_a_proj_with_mqa.weight", c.kv_lora_rank, d);
  w.kv_a_norm = b.f32(a + "kv_a_layernorm.weight", {c.kv_lora_rank});
  w.kv_b =
      b.linear(a + "kv_b_proj.weight", nh * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
  w.o_proj = b.linear(a + "o_proj.weight", d, nh * c.v_head_dim);
  const std::string ix = a + "indexer.";
  IndexerWeights& i = w.indexer;
  i.wq_b = b.linear(ix + "wq_b.weight", int64_t(c.index_n_heads) * c.index_head_dim, c.q_lora_rank);
  i.wk = b.linear(ix + "wk.weight", c.index_head_dim, d);
  i.k_norm_weight = b.f32(ix + "k_norm.weight", {c.index_head_dim});
  i.k_norm_bias = b.f32(ix + "k_norm.bias", {c.index_head_dim});
  i.weights_proj = b.linear(ix + "weights_proj.weight", c.index_n_heads, d);
  i.kpool_gate = b.linear(ix + "kpool_gate.weight", 1, d);
  i.kpool_ape = b.f32(ix + "kpool_compress_ape", {c.index_kpool});
  return w;
}

SwiGluWeights bind_swiglu(Binder& b, const std::string& p, int64_t width, int64_t d) {
  return SwiGluWeights{b.linear(p + "gate_proj.weight", width, d),
                       b.linear(p + "up_proj.weight", width, d),
                       b.linear(p + "down_proj.weight", d, width)};
}

void bind_ffn(Binder& b, const ModelConfig& c, const std::string& p, bool dense, LayerWeights& l) {
  const int64_t d = c.hidden_size;
  l.dense_mlp = dense;
  if (dense) {
    l.mlp = bind_swiglu(b, p + "mlp.", c.intermediate_size, d);
    return;
  }
  l.moe.router = b.f32(p + "mlp.gate.weight", {c.n_routed_experts, d});
  l.moe.score_bias = b.f32(p + "mlp.gate.e_score_correction_bias", {c.n_routed_experts});
  for (int e = 0; e < c.n_routed_experts; ++e)
    l.moe.experts.push_back(
        bind_swiglu(b, p + "mlp.experts." + std::to_string(e) + ".", c.moe_intermediate_size, d));
  if (c.n_shared_experts > 0)
    l.moe.shared = bind_swiglu(b, p + "mlp.shared_experts.",
                               int64_t(c.moe_intermediate_size) * c.n_shared_experts, d);
}

}  // namespace

ModelWeights ModelWeights::bind(const ModelConfig& c, std::shared_ptr<const TensorSource> source,
                                Quantized quantized) {
  c.validate();
  ModelWeights w;
  w.source = source;
  w.identity = source->identity();
  Binder b(*source, w, quantized);
  const int64_t d = c.hidden_size;
  w.embed = b.linear("model.embed_tokens.weight", c.vocab_size, d);
  w.final_norm = b.f32("model.norm.weight", {d});
  w.lm_head = b.linear("lm_head.weight", c.vocab_size, d);
  w.hc_head = HcHead{b.f32("model.hc_head_fn", {c.hc_mult, c.hc_dim()}),
                     b.f32("model.hc_head_base", {c.hc_mult}), b.f32("model.hc_head_scale", {1})};
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = layer_prefix(i);
    LayerWeights l;
    l.kind = c.layer_kind(i);
    l.input_norm = b.f32(p + "input_layernorm.weight", {d});
    l.post_attn_norm = b.f32(p + "post_attention_layernorm.weight", {d});
    l.hc_attn = bind_hc_site(b, c, p, "attn");
    l.hc_ffn = bind_hc_site(b, c, p, "ffn");
    if (l.kind == LayerKind::kLinearAttention) {
      l.kda = bind_kda(b, c, p);
    } else {
      l.mla = bind_mla(b, c, p);
    }
    bind_ffn(b, c, p, c.is_dense_mlp(i), l);
    w.layers.push_back(std::move(l));
  }
  if (c.mtp_layer() >= 0) {
    const std::string p = layer_prefix(c.mtp_layer());
    MtpWeights m;
    m.enorm = b.f32(p + "enorm.weight", {d});
    m.hnorm = b.f32(p + "hnorm.weight", {d});
    m.eh_proj = b.linear(p + "eh_proj.weight", d, 2 * d);
    m.head_norm = b.f32(p + "shared_head.norm.weight", {d});
    m.layer.kind = LayerKind::kSparseAttention;
    m.layer.input_norm = b.f32(p + "input_layernorm.weight", {d});
    m.layer.post_attn_norm = b.f32(p + "post_attention_layernorm.weight", {d});
    m.layer.mla = bind_mla(b, c, p);
    bind_ffn(b, c, p, /*dense=*/false, m.layer);
    w.mtp = std::move(m);
  }
  b.check_no_unknown();
  return w;
}

}  // namespace sparkglm
