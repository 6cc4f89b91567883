#pragma once
// The DSA indexer of MODEL.md section 4 on the device, cpu::dsa_indexer's contract: pooled keys,
// ReLU-weighted pool scores, and the attended set (top pools by score, ties to the lower pool, NaN
// never chosen, then the tail; every token when a query sees at most topk pools).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace sparkglm::cuda {

// d_i. The kernels are templates over it with two instantiations, chosen at run time from their
// `dim` argument: production's 128 and tinyglm-micro's 32 (any other is refused).
inline constexpr int kIndexDim = 128;
inline constexpr int kIndexMicroDim = 32;
inline constexpr int kIndexKpool = 4;          // tokens per pool
inline constexpr int kIndexMaxPools = 262144;  // per query: 1,048,576-token contexts

// pooled[p] = sum_i a_i keys[4p + i], a = softmax_i(gates[4p + i] + ape[i]), i increasing.
// keys: [4P, d_i] one sequence's indexer keys by position; gates: [4P]; ape: [4]; pooled: [P, d_i].
void dsa_pool_keys(const float* keys, const float* gates, const float* ape, int64_t pools,
                   float* pooled, cudaStream_t stream, int dim = kIndexDim);

// Pooled keys as the runner keeps them: in pages beside the token keys, one entry per pool of
// kIndexKpool tokens, so a block of block_size tokens holds block_size / kIndexKpool pools. Pool p
// of a sequence is entry table[p / pools_per_block] * pools_per_block + p % pools_per_block.
// With table == nullptr the pools are contiguous: pool p is entry p. With table_stride > 0 each
// scored row has its own sequence: row r reads the table at table + r * table_stride (decode rows,
// one sequence each, scored in one launch).
struct PooledKeys {
  const float* data = nullptr;  // [entries, d_i]
  const int32_t* table = nullptr;
  int pools_per_block = 0;
  int64_t table_stride = 0;
};

// The pools completed by a step's rows, each pooled once into its page entry (dsa_pool_keys'
// formula): row i at positions[i] completes pool positions[i] / 4 when positions[i] % 4 == 3, and
// its four tokens are records page_rows[i] - 3 .. page_rows[i] of key_pages and gate_pages; the
// pool's entry is page_rows[i] / 4 of pooled_pages. The block size must be a multiple of 4.
void dsa_pool_completed(const float* key_pages, const float* gate_pages, const float* ape,
                        const int32_t* positions, const int32_t* page_rows, int64_t rows,
                        float* pooled_pages, cudaStream_t stream, int dim = kIndexDim);

// scores[r][p] = (sum_h w[r][h] ReLU(q[r][h] . pooled[p])) / sqrt(d_i * heads), heads summed in
// increasing h, for p < pools. q: [rows, heads, d_i]; w: [rows, heads]; scores: [rows, pools].
// With `positions` ([rows], device), row r scores only the pools it sees, p < min(pools,
// (positions[r] + 1) / 4), and leaves the rest of its row as it was (dsa_select reads no further):
// `pools` is then a bound that sizes the grid, so a captured launch serves rows of any length up
// to it. A pool's score does not depend on the bound (one-row kernel: the decode rows' path, also
// for rows of their own sequences, pooled.table_stride > 0).
void dsa_pool_scores(const float* q, const float* w, int64_t rows, int heads,
                     const PooledKeys& pooled, int64_t pools, float* scores, cudaStream_t stream,
                     int dim = kIndexDim, const int32_t* positions = nullptr);

// The attended positions of query r at position positions[r] (ascending) and their count.
// scores: [rows, score_stride]; out: [rows, out_stride] with out_stride >= topk_pools * 4 + 3 and
// >= the dense count t + 1 for dense rows; counts: [rows]. max_pools: no row has more pools than
// this ((positions[r] + 1) / 4 <= max_pools <= score_stride): it sizes the grid of the multi-block
// path for rows longer than one block keeps in shared memory (dsa_select.cu). workspace:
// dsa_select_workspace_bytes(rows, max_pools) bytes of device memory (none needed, and nullptr
// allowed, when that is 0). No host sync, no allocation: the launches can be captured.
// tie_flipped: the negative control EngineFault::kIndexerTieFlipped (engine_fault.h), equal
// scores choosing the higher pools, as cpu::select_attended does under that fault.
void dsa_select(const float* scores, int64_t score_stride, const int32_t* positions, int64_t rows,
                int64_t max_pools, int topk_pools, int32_t* out, int64_t out_stride,
                int32_t* counts, void* workspace, cudaStream_t stream, bool tie_flipped = false);

// Device bytes dsa_select needs for `rows` rows of at most `max_pools` pools each: the per-row
// radix state and per-chunk counts of the multi-block path, 0 while no row can be that long.
size_t dsa_select_workspace_bytes(int64_t rows, int64_t max_pools);

}  // namespace sparkglm::cuda
