#include "engine/model/step_footprint.h"

#include <algorithm>

#include "engine/model/weight_footprint.h"

namespace sparkglm {

namespace {

// Tokens one MLA query attends: every visible token up to the indexer's selection plus its tail.
int64_t attended(const ModelConfig& c, int64_t visible) {
  return std::min<int64_t>(visible, c.index_topk + c.index_kpool - 1);
}

// Pools the indexer scores, or 0 while every token is selected anyway.
int64_t scored_pools(const ModelConfig& c, int64_t visible) {
  const int64_t pools = visible / c.index_kpool;
  return pools > c.index_topk_pools() ? pools : 0;
}

}  // namespace

DecodeStepBytes decode_step_bytes(const ModelConfig& c, int rows, int64_t context, KvDtype kv_dtype,
                                  CheckpointFormat format) {
  const WeightFootprint w = weight_footprint(c, format);
  const int64_t e = c.n_routed_experts;
  const int64_t experts = std::min<int64_t>(e, int64_t(rows) * c.num_experts_per_tok);
  DecodeStepBytes b;
  b.weights = w.non_expert_decode_bytes + rows * w.embedding_row_bytes +
              w.routed_expert_bytes / e * experts;
  b.kda_state = int64_t(rows) * 2 * w.kda_state_bytes;
  const int64_t n = context + 1;
  const int64_t latent_vec = int64_t(kv_vector_bytes(kv_dtype, c.kv_lora_rank));
  const int64_t index_vec = int64_t(kv_vector_bytes(kv_dtype, c.index_head_dim));
  const int64_t per_layer = attended(c, n) * latent_vec + scored_pools(c, n) * index_vec;
  b.latent = int64_t(rows) * c.num_mla_layers() * per_layer;
  return b;
}

PrefillFlops prefill_flops(const ModelConfig& c, int64_t tokens, int64_t logit_rows) {
  const WeightFootprint w = weight_footprint(c);
  const int64_t head = int64_t(c.vocab_size) * c.hidden_size;
  PrefillFlops f;
  f.projections = 2 * (w.active_params - head) * tokens + 2 * head * logit_rows;
  int64_t per_layer = 0;
  for (int64_t t = 0; t < tokens; ++t)
    per_layer += 4 * int64_t(c.num_attention_heads) * c.kv_lora_rank * attended(c, t + 1) +
                 2 * int64_t(c.index_n_heads) * c.index_head_dim * scored_pools(c, t + 1);
  f.mla = c.num_mla_layers() * per_layer;
  const int64_t k = c.kda.head_dim, v = c.kda.head_dim;
  f.kda = int64_t(c.num_kda_layers()) * tokens * c.kda.num_heads *
          (6 * k * v + 2 * kKdaChunkPositions * (3 * k + 2 * v));
  return f;
}

}  // namespace sparkglm
