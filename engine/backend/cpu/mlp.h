#pragma once
// The SwiGLU feed-forward block shared by the dense MLP and the MoE experts (MODEL.md section 5).
#include <cstdint>

#include "engine/core/thread_pool.h"
#include "engine/model/weights.h"

namespace sparkglm::cpu {

// x: [T, D] -> out: [T, D], width W = w.gate.rows.
//   g = W_gate x, u = W_up x                         # [T, W] each
//   h = SiLU(min(g, L)) * clamp(u, -L, L)             # L = clamp_limit; no clamp when L <= 0
//   out = W_down h
// Every projection is a cpu::linear, so a row's result does not depend on T or the thread count.
// out must not alias x. With `fp4` (a routed expert in spark mode), each row of x and of h is
// first rounded through NVFP4 (weight_quantizer.h's round_trip_nvfp4: E2M1 values, one E4M3 scale
// per 16, global scale fp4->gate_up / fp4->down), as an FP4 tensor core would read it.
void swiglu_forward(const SwiGluWeights& w, const float* x, int64_t T, float* out, ThreadPool& pool,
                    float clamp_limit, const Fp4ActivationScales* fp4 = nullptr);

}  // namespace sparkglm::cpu
