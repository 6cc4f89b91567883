#include "engine/backend/cuda/runner_buffers.h"

#include <algorithm>

#include "engine/backend/cuda/mhc.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/backend/cuda/mla_prefill.h"
#include "engine/backend/cuda/moe_experts.h"
#include "engine/backend/cuda/moe_prefill.h"

namespace sparkglm::cuda {

Workspace Workspace::carve(Carve& c, const ModelConfig& m, const RunnerShape& s) {
  const int64_t T = s.rows, D = m.hidden_size, hc = m.hc_mult;
  const int64_t H = m.kda.num_heads, K = m.kda.head_dim, HK = H * K;
  const int64_t R = m.kv_lora_rank, heads = m.num_attention_heads;
  const int64_t di = m.index_head_dim, I = m.index_n_heads, C = kMlaRowChunk;
  const int64_t E = m.n_routed_experts, k = m.num_experts_per_tok, W = m.moe_intermediate_size;
  const int64_t shared_w = W * std::max(1, m.n_shared_experts);
  const int64_t dec = std::min<int64_t>(T, kDecodeMaxRows);
  Workspace w{};
  w.X = c.take<float>(T * hc * D);
  w.mtp_cat = reinterpret_cast<uint16_t*>(w.X + (hc - 1) * T * D);
  w.X_next = c.take<float>(std::min<int64_t>(T, kHcFoldRows) * hc * D);  // decode-sized folds
  w.y = c.take<float>(T * D);
  w.normed = c.take<float>(T * D);
  w.block_out = c.take<float>(T * D);
  w.post = c.take<float>(T * hc);
  w.comb = c.take<float>(T * hc * hc);
  w.hc_partials = c.take<float>(hc_partials_floats(T));  // the split form for every row count
  w.normed_bf16 = c.take<uint16_t>(T * D);

  // q, k and v projections as one [T, 3*H*K] product (raw_k, raw_v: its column offsets).
  w.raw_q = c.take<float>(T * 3 * HK);
  w.raw_k = w.raw_q + HK;
  w.raw_v = w.raw_q + 2 * HK;
  for (float** p : {&w.q, &w.k, &w.v, &w.f, &w.decay, &w.gate, &w.o}) *p = c.take<float>(T * HK);
  w.low = c.take<float>(2 * T * K);  // the decay's and the gate's low-rank factors
  w.b_logit = c.take<float>(T * H);
  w.beta = c.take<float>(T * H);
  w.low_bf16 = c.take<uint16_t>(2 * T * K);
  w.o_bf16 = c.take<uint16_t>(T * HK);

  w.latent = c.take<float>(T * R);
  w.index_keys = c.take<float>(T * di);
  w.index_gates = c.take<float>(T);
  w.cq = c.take<float>(T * m.q_lora_rank);
  w.cq_bf16 = c.take<uint16_t>(T * m.q_lora_rank);
  w.mq = c.take<float>(C * heads * m.qk_nope_head_dim);
  w.q_tilde = c.take<float>(C * heads * R);
  w.o_bar = c.take<float>(C * heads * R);
  w.mo = c.take<float>(C * heads * m.v_head_dim);
  w.mo_bf16 = c.take<uint16_t>(C * heads * m.v_head_dim);
  w.mq_bf16 = c.take<uint16_t>(C * heads * m.qk_nope_head_dim);
  w.o_bar_bf16 = c.take<uint16_t>(C * heads * R);
  w.iq = c.take<float>(C * I * di);
  w.iw = c.take<float>(C * I);
  w.scores = c.take<float>(C * std::max(1, s.max_pools));
  w.lists = c.take<int32_t>(C * s.attend_max);
  w.counts = c.take<int32_t>(C);
  w.select_ws = c.take<char>(int64_t(dsa_select_workspace_bytes(C, s.max_pools)));
  // Attention scratch: the larger of a chunk of dense prefill rows (their causal lengths end at
  // most at attend_max), a chunk of sparse rows, and a decode batch.
  w.attn_ws_bytes = std::max(
      {mla_prefill_workspace_bytes(int(C), int(heads), std::max(0, s.attend_max - int(C)),
                                   s.table_stride, int(R)),
       size_t(mla_decode_workspace_floats(int(C), int(heads), s.attend_max, int(R))) * 4,
       size_t(mla_decode_workspace_floats(s.max_seqs, int(heads), s.attend_max, int(R))) * 4});
  w.attn_ws = c.take<float>(int64_t(w.attn_ws_bytes / 4));

  w.router_logits = c.take<float>(T * E);
  w.experts = c.take<int32_t>(T * k);
  w.expert_weights = c.take<float>(T * k);
  w.moe_h = c.take<uint16_t>(dec * k * W);
  w.moe_y = c.take<float>(dec * k * D);
  w.moe_groups = c.take<int32_t>(moe_decode_group_ints(dec, int(k)));
  w.moe_shared_gu = c.take<float>(dec * 2 * shared_w);
  w.moe_shared_h = c.take<uint16_t>(dec * shared_w);
  w.moe_shared_y = c.take<float>(dec * D);
  // Spark runs every row through the per-pair path (spark_moe.h) in pieces of `dec` rows: its
  // inputs and gate/up products instead of the grouped GEMMs' workspace.
  w.moe_prefill_ws =
      c.take<char>(s.spark ? 0 : int64_t(moe_prefill_workspace_bytes(T, int(k), int(E), D, W)));
  w.spark_xq = c.take<uint16_t>(s.spark ? dec * k * D : 0);
  w.spark_gu = c.take<float>(s.spark ? dec * k * 2 * W : 0);
  const int64_t mlp_w = std::max<int64_t>(m.intermediate_size, shared_w);
  w.gu = c.take<float>(T * 2 * mlp_w);
  w.mlp_h = c.take<uint16_t>(T * mlp_w);

  w.head_rows = c.take<float>(kLogitChunk * D);
  w.head_bf16 = c.take<uint16_t>(kLogitChunk * D);
  w.logits = c.take<float>(kLogitChunk * int64_t(m.vocab_size));
  w.draws = c.take<SampleParams>(T);
  w.sample_scratch = c.take<char>(int64_t(sample_scratch_bytes(kLogitChunk, m.vocab_size)));
  const int64_t drafts = s.drafts ? kDecodeMaxRows : 0;
  w.draft_logits = c.take<float>(drafts * int64_t(m.vocab_size));
  w.draft_picks = c.take<int32_t>(drafts);
  w.chain_logits = c.take<float>(drafts * int64_t(m.vocab_size));
  w.chain_map = c.take<int32_t>(drafts * kChainStride);
  w.chain_out = c.take<int32_t>(drafts * kChainStride);
  w.chain_first_picks = c.take<int32_t>(drafts);
  w.chain_picks = c.take<int32_t>(drafts);
  return w;
}

Caches Caches::carve(Carve& c, const ModelConfig& m, int num_blocks, int block_size, KvDtype dtype,
                     int slots, int snapshots, int records) {
  const int64_t layers = m.num_mla_layers() + (m.mtp_layer() >= 0 ? 1 : 0);
  const int64_t kda = m.num_kda_layers();
  const int64_t H = m.kda.num_heads, K = m.kda.head_dim;
  Caches x{};
  x.tokens = int64_t(num_blocks) * block_size;
  x.record_bytes = latent_record_bytes(
      dtype == KvDtype::kFp8G128 ? LatentFormat::kFp8G128 : LatentFormat::kBF16, m.kv_lora_rank);
  x.latents = c.take<uint8_t>(layers * x.tokens * x.record_bytes);
  x.index_keys = c.take<float>(layers * x.tokens * m.index_head_dim);
  x.index_gates = c.take<float>(layers * x.tokens);
  x.pooled_keys = c.take<float>(layers * (x.tokens / kIndexKpool) * m.index_head_dim);
  x.kda_state = c.take<float>(kda * slots * H * K * K);
  x.kda_conv = c.take<float>(kda * slots * 3 * (m.kda.short_conv_kernel_size - 1) * H * K);
  x.snapshot_state = c.take<float>(kda * snapshots * H * K * K);
  x.snapshot_conv = c.take<float>(kda * snapshots * 3 * (m.kda.short_conv_kernel_size - 1) * H * K);
  x.records = records;
  x.record_state = c.take<float>(kda * slots * records * H * K * K);
  x.record_conv =
      c.take<float>(kda * slots * records * 3 * (m.kda.short_conv_kernel_size - 1) * H * K);
  return x;
}

}  // namespace sparkglm::cuda
