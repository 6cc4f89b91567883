#pragma once
// MLA attention over a KV shard (docs/parallel.md): rank r of N holds the heads
// [r H/N, (r+1) H/N) (column-parallel q_b and kv_b, weight_shard.h) and the latents of the
// positions p with p % N == r (latent_cache.h's LatentShard). For m query rows:
//
//   1. all-gather the absorbed queries of every rank's heads:  q~ [m, H, R]
//   2. for every row i and head h, over the attended positions this rank owns (J_r, ascending):
//        s_j = scale * q~_h . c_j      mx = max_j s_j
//        l = sum_j exp(s_j - mx)        u = sum_j exp(s_j - mx) c_j   [R]  (increasing j)
//      and mx = -inf, l = 0, u = 0 when the rank owns none of them
//   3. all-gather the partials (mx, l, u):  [N, m, H, 2 + R]
//   4. for this rank's heads, ranks k = 0..N-1 in order:
//        M = max_k mx_k,  w_k = exp(mx_k - M) (0 for an empty part),
//        ō = (sum_k w_k u_k) / (sum_k w_k l_k)                          [m, H/N, R]
//
// Every rank combines the same gathered bits in the same order, so ō depends neither on the batch
// nor on the thread count, and equals one rank's softmax (mla_layer.h) up to rounding. Every rank
// calls this with the same m (the same batch): it runs two collectives.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/thread_pool.h"
#include "engine/dist/communicator.h"
#include "engine/runtime/latent_cache.h"

namespace sparkglm::cpu {

// One query row: its sequence's block table and the positions it attends (ascending).
struct AttendedRow {
  const std::vector<int32_t>* table = nullptr;
  std::span<const int32_t> positions;
};

// rows: [m]; q_tilde: [m, local_heads, R] of this rank's heads; o_bar: [m, local_heads, R].
// cache.shard() must be comm's rank and size; its latents are read from layer `layer`.
void attend_latent_shard(dist::Communicator& comm, const LatentCache& cache, int layer,
                         std::span<const AttendedRow> rows, int64_t local_heads, float scale,
                         const float* q_tilde, float* o_bar, ThreadPool& pool);

}  // namespace sparkglm::cpu
