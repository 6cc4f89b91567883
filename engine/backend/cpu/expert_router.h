#pragma once
// The MoE router's expert selection for one token (MODEL.md section 5, docs/checkpoint.md
// "Numerical choices"): sigmoid scores, top-k of score + correction bias, normalised weights.
#include <cstdint>

#include "engine/model/config.h"

namespace sparkglm::cpu {

struct ExpertChoice {
  int32_t expert;  // in [0, E), or -1 for an empty slot (fewer than k experts had a usable score)
  float weight;    // 0 for an empty slot
};

// router_logits: [E] FP32 (W_router x computed in FP32); bias: [E] e_score_correction_bias (may
// be null: no bias); out: [k], k = num_experts_per_tok, written in rank order.
//   s        = sigmoid(logits)
//   chosen   = top-k of s + bias; equal values rank the lower expert index first; an expert whose
//              s + bias is NaN is never chosen, so with fewer than k usable experts the tail of
//              `out` is {-1, 0}.
//   weight_i = (s_i / sum_chosen s_j) * routed_scaling_factor   (norm_topk_prob; the sum runs in
//              rank order), else s_i * routed_scaling_factor. The bias only selects; it never
//              enters a weight.
void select_experts(const ModelConfig& c, const float* router_logits, const float* bias,
                    ExpertChoice* out);

}  // namespace sparkglm::cpu
