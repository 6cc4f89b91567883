#pragma once
// Hyper-connections (mHC, MODEL.md section 2) on the device, cpu::hc_pre / hc_post / hc_head's
// arithmetic. The residual is X [T, 4, D] (hc_mult = 4 streams); one block works on one row, with
// the row's 4*D values held in registers, so a row never depends on other rows. The kernels are
// templates over D with two instantiations, production's 4096 and tinyglm-micro's 256, chosen at
// run time from HcConstants::width / hc_post's width; any other width is refused.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

inline constexpr int kHcStreams = 4;       // hc_mult: the kernels are specialised for it
inline constexpr int kHcWidth = 4096;      // D of the production geometry
inline constexpr int kHcMicroWidth = 256;  // D of tinyglm-micro
inline constexpr int kHcMixes = 24;        // 4 pre + 4 post + 16 comb

struct HcConstants {
  float rms_eps = 1e-5f;  // rms_norm_eps
  float hc_eps = 1e-6f;
  int sinkhorn_iters = 20;
  int width = kHcWidth;  // D = hidden_size: kHcWidth or kHcMicroWidth
};

// With `partials` every row takes the split form (the 24 dot products of a row spread over 32
// blocks, added in slice order), whatever T: the engine passes it, so a row's bits never depend
// on how many rows share the step (one path for decode and prefill). Without it, one block per
// row (another summation order). Floats of the `partials` scratch for T rows:
int64_t hc_partials_floats(int64_t T);

// X: [T, 4, D] -> y: [T, D], post: [T, 4], comb: [T, 4, 4] (after Sinkhorn).
// fn: [24, 4*D], base: [24], scale: [3] (FP32). partials: hc_partials_floats(T) scratch, or null.
void hc_pre(const HcConstants& k, const float* fn, const float* base, const float* scale,
            const float* X, int64_t T, float* y, float* post, float* comb, cudaStream_t stream,
            float* partials = nullptr);

// In place: X[s] = post[s] * b + sum over s' (increasing) of comb[s][s'] * X[s'].  b: [T, D].
void hc_post(const float* b, const float* post, const float* comb, float* X, int64_t T,
             cudaStream_t stream, int width = kHcWidth);

// The final reduction: pre = sigmoid(mixes * scale[0] + base) + hc_eps, h = sum_s pre[s] X[s].
// fn: [4, 4*D], base: [4], scale: [1]; h: [T, D].
void hc_head(const HcConstants& k, const float* fn, const float* base, const float* scale,
             const float* X, int64_t T, float* h, cudaStream_t stream, float* partials = nullptr);

// The launches a decode-sized step folds into a pre or the head: two launches instead of four for
// post, pre and norm, with the bits of the separate launches (tests/cuda/mhc_cuda_test.cpp).
// b set: hc_post(b, post, comb) of X comes first, written to X_next (not in place: X is left as
// it was) and read by the pre. norm_w set: rms_norm_rows(y, norm_w, norm_eps, T, D, normed,
// normed_bf16) follows. The runner folds steps of up to kHcFoldRows rows (its X_next room).
inline constexpr int64_t kHcFoldRows = 64;
struct HcFold {
  const float* b = nullptr;  // [T, D], or null: no post ahead
  const float* post = nullptr;
  const float* comb = nullptr;
  float* X_next = nullptr;        // [T, 4, D]
  const float* norm_w = nullptr;  // [D], or null: no norm after
  float norm_eps = 0.0f;
  float* normed = nullptr;          // [T, D]
  uint16_t* normed_bf16 = nullptr;  // [T, D] or null
};
void hc_pre_folded(const HcConstants& k, const float* fn, const float* base, const float* scale,
                   const float* X, int64_t T, float* y, float* post, float* comb, float* partials,
                   const HcFold& fold, cudaStream_t stream);
void hc_head_folded(const HcConstants& k, const float* fn, const float* base, const float* scale,
                    const float* X, int64_t T, float* h, float* partials, const HcFold& fold,
                    cudaStream_t stream);

}  // namespace sparkglm::cuda
