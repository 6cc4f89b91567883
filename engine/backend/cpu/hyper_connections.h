#pragma once
// Hyper-connections (mHC, MODEL.md section 2): the residual is hc = hc_mult streams of width D.
// Each layer's attn and ffn sites read the streams into one block input (hc_pre) and write the
// block output back into the streams (hc_post); after the last layer hc_head reduces them.
//
// Arithmetic, literally as MODEL.md states it (v = the row's X flattened stream-major, N = hc*D):
//   rs     = 1 / sqrt(dot(v, v) / N + rms_norm_eps)           # dot: cpu::dot's fixed order
//   mixes  = dot(fn_j, v) * rs                                # one per fn row j
//   pre    = sigmoid(mixes[0:hc] * scale[0] + base[0:hc]) + hc_eps
//   post   = 2 * sigmoid(mixes[hc:2hc] * scale[1] + base[hc:2hc])
//   comb   = softmax along s' of (mixes[2hc:] * scale[2] + base[2hc:]) as [s][s'], then + hc_eps
//   comb   = comb / (column sums + hc_eps), then hc_sinkhorn_iters - 1 times rows, then columns
//   y      = sum_s pre[s] * X[s]                              # s in increasing order
#include <cstdint>

#include "engine/core/thread_pool.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sparkglm::cpu {

// X: [T, hc, D] -> y: [T, D], post: [T, hc], comb: [T, hc, hc] (comb[t][s][s'], after Sinkhorn).
void hc_pre(const ModelConfig& c, const HcSite& w, const float* X, int64_t T, float* y, float* post,
            float* comb, ThreadPool& pool);

// In place on X: [T, hc, D]; b: [T, D] the block output, post: [T, hc], comb: [T, hc, hc].
//   X'[s] = post[s] * b + (sum over s' in increasing order of comb[s][s'] * X[s'])
void hc_post(const ModelConfig& c, float* X, const float* b, const float* post, const float* comb,
             int64_t T, ThreadPool& pool);

// X: [T, hc, D] -> h: [T, D].  pre = sigmoid(mixes * scale[0] + base) + hc_eps (fn: [hc, N]);
// h = sum_s pre[s] * X[s].
void hc_head(const ModelConfig& c, const HcHead& w, const float* X, int64_t T, float* h,
             ThreadPool& pool);

}  // namespace sparkglm::cpu
