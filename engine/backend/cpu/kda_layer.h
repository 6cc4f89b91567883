#pragma once
// The KDA layer (Kimi Delta Attention: gated delta rule with per-channel decay), MODEL.md section 3
// and docs/checkpoint.md, on the CPU. H heads, K = V = head_dim, D = hidden, taps = short conv:
//   q, k, v = SiLU(causal depthwise conv(W_q x, W_k x, W_v x))   [T, H*K] each
//   q_h = l2norm(q_h) / sqrt(K), k_h = l2norm(k_h)               per head
//   g   = gate_lower_bound * sigmoid(exp(A_log_h) * (W_fb W_fa x + dt_bias))   [T, H*K]
//   beta_h = sigmoid((W_b x)_h)                                    [T, H]
//   per position: S_h = diag(e^{g_h}) S_h; S_h += beta_h k_h (v_h - S_h^T k_h)^T; o_h = S_h^T q_h
//   o_h = RMSNorm(o_h; o_norm) * sigmoid(W_gb W_ga x)_h          [T, H*V]
//   out = W_o o                                                    [T, D]
// The recurrence itself lives in kda_delta_rule.h.
//
// Determinism: every projection goes through cpu::linear (batch invariant), the convolution, norms
// and recurrence of a (sequence, head) pair run on one thread in a fixed order, so a row's result
// depends neither on the other sequences of the batch nor on the thread count.
#include "engine/core/thread_pool.h"
#include "engine/model/config.h"
#include "engine/model/forward_batch.h"
#include "engine/model/weights.h"
#include "engine/runtime/kda_state_pool.h"

namespace sparkglm::cpu {

// kAuto: the chunked (WY) form for a prompt piece of any length, token by token for a decode row
// (SequenceSlice::decode).
// kRecurrent: token by token everywhere (the reference the chunked form is tested against).
enum class KdaPath { kAuto, kRecurrent };

// x: [T, D] rows of the batch, already normalised by input_layernorm; out: [T, D] = W_o o.
// Reads and updates each sequence's conv history and recurrent state in `states` (KDA layer
// index kda_index, slot = batch.seqs[i].state_slot). The caller zeros a slot before a sequence's
// first step (start_position 0); this function never reads rows of other sequences.
void kda_layer_forward(const ModelConfig& c, const KdaWeights& w, int kda_index,
                       const ForwardBatch& batch, KdaStatePool& states, const float* x, float* out,
                       ThreadPool& pool, KdaPath path = KdaPath::kAuto);

}  // namespace sparkglm::cpu
