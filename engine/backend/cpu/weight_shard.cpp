#include "engine/backend/cpu/weight_shard.h"

#include <string>

#include "engine/core/error.h"

namespace sparkglm::cpu {

namespace {

// Rows [r0, r1) of w: a view.
Linear rows_of(const Linear& w, int64_t r0, int64_t r1) {
  const size_t elem = w.dtype == DType::kBF16 ? 2 : 4;
  return {w.dtype, r1 - r0, w.cols,
          static_cast<const char*>(w.data) + size_t(r0) * size_t(w.cols) * elem};
}

// Columns [c0, c1) of w: a copy in FP32 (BF16 widens exactly) kept in `owned`.
Linear cols_of(const Linear& w, int64_t c0, int64_t c1, ModelWeights& owner) {
  std::vector<float> copy(size_t(w.rows * (c1 - c0)));  // [rows, c1 - c0]
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = c0; c < c1; ++c) copy[size_t(r * (c1 - c0) + c - c0)] = w.at(r, c);
  owner.owned.push_back(std::move(copy));
  return {DType::kF32, w.rows, c1 - c0, owner.owned.back().data()};
}

struct Range {
  int64_t begin, end;
};
Range part(int64_t total, int rank, int world) {
  return {total / world * rank, total / world * (rank + 1)};
}

void need(int64_t value, int world, const char* field) {
  if (value % world != 0)
    throw Error(ErrorKind::kInvalidArgument, std::string(field) + " = " + std::to_string(value) +
                                                 " is not divisible by the tensor-parallel size " +
                                                 std::to_string(world));
}

void shard_kda(const ModelConfig& c, KdaWeights& w, Range h, ModelWeights& owner) {
  const int64_t k = c.kda.head_dim, taps = c.kda.short_conv_kernel_size;
  const int64_t c0 = h.begin * k, c1 = h.end * k;  // channels of the rank's heads
  w.q_proj = rows_of(w.q_proj, c0, c1);
  w.k_proj = rows_of(w.k_proj, c0, c1);
  w.v_proj = rows_of(w.v_proj, c0, c1);
  w.q_conv += c0 * taps;
  w.k_conv += c0 * taps;
  w.v_conv += c0 * taps;
  w.f_b = rows_of(w.f_b, c0, c1);
  w.a_log += h.begin;
  w.dt_bias += c0;
  w.b_proj = rows_of(w.b_proj, h.begin, h.end);
  w.g_b = rows_of(w.g_b, c0, c1);
  w.o_proj = cols_of(w.o_proj, c0, c1, owner);
}

void shard_mla(const ModelConfig& c, MlaWeights& w, Range h, ModelWeights& owner) {
  const int64_t dn = c.qk_nope_head_dim, dv = c.v_head_dim;
  w.q_b = rows_of(w.q_b, h.begin * dn, h.end * dn);
  w.kv_b = rows_of(w.kv_b, h.begin * (dn + dv), h.end * (dn + dv));
  w.o_proj = cols_of(w.o_proj, h.begin * dv, h.end * dv, owner);
}

void shard_swiglu(SwiGluWeights& w, int rank, int world, ModelWeights& owner) {
  const Range i = part(w.gate.rows, rank, world);
  w.gate = rows_of(w.gate, i.begin, i.end);
  w.up = rows_of(w.up, i.begin, i.end);
  w.down = cols_of(w.down, i.begin, i.end, owner);
}

void shard_layer(const ModelConfig& c, LayerWeights& w, int rank, int world, ModelWeights& owner) {
  if (w.kind == LayerKind::kLinearAttention) {
    shard_kda(c, w.kda, part(c.kda.num_heads, rank, world), owner);
  } else {
    shard_mla(c, w.mla, part(c.num_attention_heads, rank, world), owner);
  }
  if (w.dense_mlp) {
    shard_swiglu(w.mlp, rank, world, owner);
  } else if (w.moe.shared) {
    shard_swiglu(*w.moe.shared, rank, world, owner);
  }
}

}  // namespace

void check_shardable(const ModelConfig& c, int world) {
  need(c.kda.num_heads, world, "linear_attn_config.num_heads");
  need(c.num_attention_heads, world, "num_attention_heads");
  need(c.intermediate_size, world, "intermediate_size");
  need(int64_t(c.moe_intermediate_size) * c.n_shared_experts, world,
       "moe_intermediate_size * n_shared_experts");
  need(c.n_routed_experts, world, "n_routed_experts");
  need(c.vocab_size, world, "vocab_size");
}

WeightShard shard_weights(const ModelConfig& config, const ModelWeights& full, int rank,
                          int world) {
  check_shardable(config, world);
  SPARKGLM_ASSERT(rank >= 0 && rank < world, "shard_weights: rank out of range");
  WeightShard s;
  s.rank = rank;
  s.world = world;
  s.local = config;
  s.local.kda.num_heads /= world;
  s.local.num_attention_heads /= world;
  s.local.intermediate_size /= world;

  ModelWeights& w = s.weights;
  w.owned.reserve(size_t(config.num_hidden_layers + 1) * 3);  // o_proj + down per layer, + MTP
  w.embed = full.embed;
  w.final_norm = full.final_norm;
  w.hc_head = full.hc_head;
  w.identity = full.identity;
  w.source = full.source;
  const Range vocab = part(config.vocab_size, rank, world);
  s.vocab_begin = vocab.begin;
  s.vocab_end = vocab.end;
  w.lm_head = rows_of(full.lm_head, vocab.begin, vocab.end);
  const Range experts = part(config.n_routed_experts, rank, world);
  s.expert_begin = int(experts.begin);
  s.expert_end = int(experts.end);

  w.layers = full.layers;
  for (LayerWeights& layer : w.layers) shard_layer(config, layer, rank, world, w);
  w.mtp = full.mtp;
  if (w.mtp) shard_layer(config, w.mtp->layer, rank, world, w);
  return s;
}

}  // namespace sparkglm::cpu
