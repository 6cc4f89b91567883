#pragma once
// The DSA indexer of MODEL.md section 4 on the device, cpu::dsa_indexer's contract: pooled keys,
// ReLU-weighted pool scores, and the attended set (top pools by score, ties to the lower pool, NaN
// never chosen, then the tail; every token when a query sees at most topk pools).
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

inline constexpr int kIndexDim = 128;         // d_i: the kernels are specialised for it
inline constexpr int kIndexKpool = 4;         // tokens per pool
inline constexpr int kIndexMaxPools = 16384;  // per query; contexts up to 65539 tokens

// pooled[p] = sum_i a_i keys[4p + i], a = softmax_i(gates[4p + i] + ape[i]), i increasing.
// keys: [4P, d_i] one sequence's indexer keys by position; gates: [4P]; ape: [4]; pooled: [P, d_i].
void dsa_pool_keys(const float* keys, const float* gates, const float* ape, int64_t pools,
                   float* pooled, cudaStream_t stream);

// scores[r][p] = (sum_h w[r][h] ReLU(q[r][h] . pooled[p])) / sqrt(d_i * heads), heads summed in
// increasing h, for p < pools. q: [rows, heads, d_i]; w: [rows, heads]; scores: [rows, pools].
void dsa_pool_scores(const float* q, const float* w, int64_t rows, int heads, const float* pooled,
                     int64_t pools, float* scores, cudaStream_t stream);

// The attended positions of query r at position positions[r] (ascending) and their count.
// scores: [rows, score_stride]; out: [rows, out_stride] with out_stride >= topk_pools * 4 + 3 and
// >= the dense count t + 1 for dense rows; counts: [rows].
void dsa_select(const float* scores, int64_t score_stride, const int32_t* positions, int64_t rows,
                int topk_pools, int32_t* out, int64_t out_stride, int32_t* counts,
                cudaStream_t stream);

}  // namespace sparkglm::cuda
