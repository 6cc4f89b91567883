#pragma once
// The MLA layer (NoPE, absorbed form) with the DSA indexer, MODEL.md section 4, on the CPU.
//
// Per query row at position t (H heads, dn = qk_nope_head_dim, dv = v_head_dim, R = kv_lora_rank):
//   c_q  = RMSNorm(W_qa x; q_a_layernorm)            [q_lora]
//   q_h  = (W_qb c_q)_h                               [H, dn]
//   q~_h = W_kb,h^T q_h                               [H, R]   sum over dn in increasing order
//   s_hj = scale * q~_h . c_j  for j in I_t           [H, |I_t|]
//   p_h  = softmax_j(s_hj), summed in increasing position order
//   ō_h  = sum_j p_hj c_j                             [H, R]   in increasing position order
//   o_h  = W_vb,h ō_h                                 [H, dv]
//   out  = W_o concat_h o_h                           [D]
// I_t comes from the DSA indexer (dsa_indexer.h); while a query sees at most index_topk/kpool
// complete pools, I_t = 0..t and the indexer is not scored at all.
//
// Prefill and decode run the same per-row computation, and every reduction has a fixed order that
// neither the batch nor the thread count changes, so prefill-then-decode equals decode-every-token
// bit for bit and a sequence's rows do not depend on the other sequences of the batch.
//
// With a KV shard (the cache's LatentShard has N > 1 ranks; docs/parallel.md) the layer's heads
// are this rank's H/N, the cache holds the latents of this rank's positions only, and the
// attention runs as latent_shard_attention.h states: the same ō up to rounding, two collectives
// per chunk of rows, so every rank must run the layer on the same batch.
#include "engine/core/thread_pool.h"
#include "engine/dist/communicator.h"
#include "engine/model/config.h"
#include "engine/model/engine_fault.h"
#include "engine/model/forward_batch.h"
#include "engine/model/selection_trace.h"
#include "engine/model/weights.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm::cpu {

// x: [T, D] rows already normalised by input_layernorm; out: [T, D].
// First writes every row's c_kv = RMSNorm(W_kva x; kv_a_layernorm), indexer key
// k^I = LayerNorm(W_ik x; k_norm w,b, eps 1e-6) and pooling gate (W_igate x) into cache layer
// `cache_layer` at its position (via its sequence's block table), then for each row attends over
// the selected cached tokens j <= t of its own sequence. `fault` reaches select_attended (a
// negative control, engine_fault.h). `comm` joins the ranks of a KV shard (null without one).
// `trace` records each sparse row's attended tokens (selection_trace.h; null: none).
void mla_layer_forward(const ModelConfig& c, const MlaWeights& w, int cache_layer,
                       const ForwardBatch& batch, LatentCache& cache, const float* x, float* out,
                       ThreadPool& pool, EngineFault fault = EngineFault::kNone,
                       dist::Communicator* comm = nullptr, SelectionTrace* trace = nullptr);

}  // namespace sparkglm::cpu
