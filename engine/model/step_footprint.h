#pragma once
// The floors one engine step is measured against, from the config alone: the bytes a decode step
// must read (over measured bandwidth: the weight-streaming floor) and the arithmetic of a prefill
// (over measured peak: the compute floor). Weights come from weight_footprint (the checkpoint's
// tensors as tinyglm stores them); nothing here walks the tensors again.
//
// Decode step of C rows, each at a position with n = context + 1 visible tokens (its own included):
//   weights   = non_expert_decode_bytes + C * embedding_row_bytes
//               + routed_expert_bytes * min(E, C * top_k) / E
//               (assumes the rows route to distinct experts, the most a step can read; C = 1 reads
//               exactly top_k experts per MoE layer)
//   kda_state = C * 2 * kda_state_bytes  (each row's recurrent state and conv history, read and
//               written back)
//   latent    = C * mla_layers * (min(n, A) * latent_vec + [P > topk / kpool] * P * index_vec)
//               A = index_topk + index_kpool - 1 (2051) tokens attended; P = floor(n / kpool)
//               pools; while every token is selected (P <= 512) the indexer need not read its
//               keys. A pool's key is made once, when its last token is stored, and kept, so a
//               query reads one pooled key per pool, not the kpool keys and gates behind it.
//               latent_vec / index_vec: kv_vector_bytes of kv_lora_rank / index_head_dim in the
//               cache dtype. Writes of the new token's entries are left out.
//
// Prefill of L tokens from position 0 (t = 0 .. L-1), FMA = 2 FLOPs:
//   projections = 2 * (active_params - vocab * hidden) * L + 2 * vocab * hidden * logit_rows
//                 (every matrix a token multiplies by, top_k routed experts; the LM head only for
//                 the rows whose logits are asked for)
//   mla         = mla_layers * sum_t [ 4 * H * kv_lora_rank * min(t + 1, A)        absorbed scores
//                                                                                   and values
//                                     + [P_t > topk / kpool] * 2 * Hi * Di * P_t ]  indexer scores
//   kda         = kda_layers * L * H_kda * (6 * K * V + 2 * c * (3 * K + 2 * V))
//                 chunked WY form, c = 64: per token and head q S, w S and the state update kᵀ u
//                 (6KV), and its row of the chunk's k kᵀ, q kᵀ, A k, A v and P v products
//   Elementwise work (norms, gates, mHC mixing, the short convolution, softmax) is left out.
#include <cstdint>

#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm {

inline constexpr int kKdaChunkPositions = 64;  // the chunk of the WY form (both backends)

struct DecodeStepBytes {
  int64_t weights = 0;    // read once for the step
  int64_t kda_state = 0;  // every row's state and conv history, read and written
  int64_t latent = 0;     // every row's latent-cache (and indexer) reads
  int64_t total() const { return weights + kda_state + latent; }
};

// `format`: the checkpoint format the weights are read in (weight_footprint's bytes).
DecodeStepBytes decode_step_bytes(const ModelConfig& config, int rows, int64_t context,
                                  KvDtype kv_dtype,
                                  CheckpointFormat format = CheckpointFormat::kBf16);

struct PrefillFlops {
  int64_t projections = 0;
  int64_t mla = 0;
  int64_t kda = 0;
  int64_t total() const { return projections + mla + kda; }
};

PrefillFlops prefill_flops(const ModelConfig& config, int64_t tokens, int64_t logit_rows = 1);

}  // namespace sparkglm
