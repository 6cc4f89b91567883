#pragma once
// The DSA sparse indexer of MODEL.md section 4 on the CPU: pooled indexer keys, ReLU-weighted pool
// scores, and the choice of attended positions (top pools by score, then the tail).
//
// Shapes: I = index_n_heads, d_i = index_head_dim, P = complete pools visible to a query.
// Every function reads only its own sequence's cache entries, so a query's selection never
// depends on the rest of the batch or on the thread count.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/thread_pool.h"
#include "engine/model/engine_fault.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm::cpu {

// The positions a query at position t attends (ascending), given the scores of the P =
// floor((t+1)/kpool) complete pools: all of 0..t when P <= topk_pools; otherwise the kpool tokens
// of each of the top topk_pools pools by score (equal scores: lower pool first; NaN never selected)
// plus the tail kpool*P..t. pool_scores: [P] (at least P values; only the first P are read).
// EngineFault::kIndexerTieFlipped (a negative control, engine_fault.h) picks the higher pool first.
std::vector<int32_t> select_attended(std::span<const float> pool_scores, int64_t t, int kpool,
                                     int topk_pools, EngineFault fault = EngineFault::kNone);

// The pooled key of one complete pool: K = sum_j a_j k_j over its kpool tokens in position order,
// a = softmax_j(gate_j + ape[j mod kpool]). Pool tokens start at a multiple of kpool, so token i
// of the pool has j mod kpool = i.
// keys: kpool pointers to [d_i]; gates: [kpool]; ape: [kpool]; out: [d_i].
void pooled_index_key(const float* const* keys, const float* gates, const float* ape, int kpool,
                      int64_t d_i, float* out);

// K_p for pools 0 .. num_pools-1 of one sequence, read from cache layer `layer` through its block
// table. Returns [num_pools, d_i], row p = K_p.
std::vector<float> pooled_index_keys(LatentCache& cache, int layer,
                                     const std::vector<int32_t>& block_table, int64_t num_pools,
                                     int kpool, const float* ape, ThreadPool& pool);

// score_p = (sum_h w_h * ReLU(q_h . K_p)) * rsqrt(d_i * I), heads summed in increasing h; ReLU
// keeps a NaN a NaN so that a broken pool is never selected. q_index: [I, d_i]; head_weights: [I];
// pooled_keys: [num_pools, d_i]. Returns [num_pools].
std::vector<float> index_pool_scores(const float* q_index, const float* head_weights, int n_heads,
                                     int64_t d_i, const float* pooled_keys, int64_t num_pools,
                                     ThreadPool& pool);

}  // namespace sparkglm::cpu
