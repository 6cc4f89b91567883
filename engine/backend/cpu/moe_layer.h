#pragma once
// The mixture-of-experts feed-forward block (MODEL.md section 5) on the CPU.
#include <cstdint>

#include "engine/core/thread_pool.h"
#include "engine/model/config.h"
#include "engine/model/engine_fault.h"
#include "engine/model/weights.h"

namespace sparkglm::cpu {

// x: [T, D], already RMSNorm(post_attention_layernorm); out: [T, D] (must not alias x).
//   logits = W_router x                       # [T, E], FP32
//   choices = select_experts(logits, bias)    # [T, k]
//   out = (sum over ranks r of w_r * expert_r(x)) + shared(x)
// Experts are clamped SwiGLUs (limit swiglu_limit); in spark mode (w.fp4_activations set) a routed
// expert reads its activations through NVFP4 (mlp.h), the shared expert does not. Tokens are
// grouped by expert and each expert runs once over its gathered rows; the per-token sum then runs
// in rank order, then the shared expert, so a token's output is bitwise independent of the other
// tokens and of the pool size. With expert parallelism only the routed experts in [expert_begin,
// expert_end) run here (the others' terms are left out of the sum; their ranks add them in the
// all-reduce); end -1 = all. EngineFault::kMoeClampDropped (a negative control, engine_fault.h)
// runs every expert unclamped.
void moe_forward(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T, float* out,
                 ThreadPool& pool, int expert_begin = 0, int expert_end = -1,
                 EngineFault fault = EngineFault::kNone);

}  // namespace sparkglm::cpu
