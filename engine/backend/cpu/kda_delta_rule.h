#pragma once
// The gated delta rule of one KDA head over consecutive positions of one sequence (MODEL.md
// section 3), in two forms that compute the same function: token by token (decode, and the
// reference), and in chunks of 64 positions solved in the WY form (prefill). Both read the head's
// recurrent state S [K, V] and leave the state after the last position in it.
//
// The chunked form, for a chunk of C positions with per-channel log decays g_t and the inclusive
// cumulative sums G_t = g_1 + ... + g_t, unrolls the recurrence into
//   u_t = v_t - S0^T (e^{G_t} * k_t) - sum_{s<t} beta_s ((e^{G_t - G_s} * k_s) . k_t) u_s
//   o_t = S0^T (e^{G_t} * q_t)       + sum_{s<=t} beta_s ((e^{G_t - G_s} * k_s) . q_t) u_s
//   S_C = diag(e^{G_C}) S0 + sum_s diag(e^{G_C - G_s}) beta_s k_s u_s^T
// where u_t = v_t - (diag(e^{g_t}) S_{t-1})^T k_t is the value the delta rule writes at t.
// G reaches 64 * gate_lower_bound = -320 within a chunk, so e^{-G} is never formed: every factor
// is e^{G_t - G_s} with t >= s, or split at a reference position inside a 16-position sub-chunk
// so both halves stay within e^{+-80}. The two forms agree to a few 1e-7 relative (FP32).
#include <cstdint>

namespace sparkglm::cpu {

// Chunks start at absolute positions that are multiples of this, so a prefill resumed at any
// position runs the same chunks as a cold one from the next boundary on.
inline constexpr int kKdaChunk = 64;

// One head's inputs and outputs for n consecutive positions. Row r of q, k, v, g and o starts at
// ptr + r * stride (the head's slice of a [T, H*K] buffer); beta of row r is beta[r * beta_stride].
struct KdaHeadRun {
  int n = 0;           // positions
  int k_dim = 0;       // K
  int v_dim = 0;       // V
  int64_t stride = 0;  // floats between consecutive rows of q, k, v, g, o
  int64_t beta_stride = 1;
  const float* q = nullptr;     // [n, K]: l2-normalised, divided by sqrt(K)
  const float* k = nullptr;     // [n, K]: l2-normalised
  const float* v = nullptr;     // [n, V]
  const float* g = nullptr;     // [n, K]: log decay per channel, in [gate_lower_bound, 0]
  const float* beta = nullptr;  // [n]: write strength in [0, 1]
  float* o = nullptr;           // [n, V]: S^T q after each position's update
};

// Token by token: S = diag(e^g) S; S += beta k (v - S^T k)^T; o = S^T q.
// state: [K, V], S[i][j] with i over keys.
void kda_recurrent_run(const KdaHeadRun& run, float* state);

// Chunked (WY) form; start_position is the absolute position of row 0.
// state: [K, V], S[i][j] with i over keys.
void kda_chunked_run(const KdaHeadRun& run, int64_t start_position, float* state);

}  // namespace sparkglm::cpu
