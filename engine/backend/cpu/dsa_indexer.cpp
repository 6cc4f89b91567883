#include "engine/backend/cpu/dsa_indexer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/core/error.h"

namespace sparkglm::cpu {

namespace {

// Pools are a handful of tokens (4 in every preset): buffers of this size live on the stack, so
// a long context's tens of thousands of pools cost no allocations; larger pools use the heap.
constexpr int kStackPool = 16;

}  // namespace

std::vector<int32_t> select_attended(std::span<const float> pool_scores, int64_t t, int kpool,
                                     int topk_pools, EngineFault fault) {
  SPARKGLM_ASSERT(t >= 0 && kpool > 0 && topk_pools >= 0, "select_attended: bad arguments");
  const int64_t num_pools = (t + 1) / kpool;  // complete pools
  std::vector<int32_t> attended;
  if (num_pools <= topk_pools) {
    attended.resize(size_t(t + 1));
    for (int64_t j = 0; j <= t; ++j) attended[size_t(j)] = int32_t(j);
    return attended;
  }
  SPARKGLM_ASSERT(int64_t(pool_scores.size()) >= num_pools,
                  "select_attended: " + std::to_string(pool_scores.size()) + " scores for " +
                      std::to_string(num_pools) + " pools");

  // Candidates are the pools with a number for a score; NaN would break the strict ordering.
  std::vector<int32_t> pools;  // [<= num_pools]
  pools.reserve(size_t(num_pools));
  for (int64_t p = 0; p < num_pools; ++p)
    if (!std::isnan(pool_scores[size_t(p)])) pools.push_back(int32_t(p));
  // (score descending, pool ascending) is a total order, so the chosen set is unique.
  auto better = [&](int32_t a, int32_t b) {
    const float sa = pool_scores[size_t(a)], sb = pool_scores[size_t(b)];
    return sa > sb || (sa == sb && a < b);
  };
  auto better_tie_flipped = [&](int32_t a, int32_t b) {  // the negative control's order
    const float sa = pool_scores[size_t(a)], sb = pool_scores[size_t(b)];
    return sa > sb || (sa == sb && a > b);
  };
  if (int64_t(pools.size()) > topk_pools) {
    const auto kth = pools.begin() + topk_pools;
    if (fault == EngineFault::kIndexerTieFlipped) {
      std::nth_element(pools.begin(), kth, pools.end(), better_tie_flipped);
    } else {
      std::nth_element(pools.begin(), kth, pools.end(), better);
    }
    pools.resize(size_t(topk_pools));
  }
  std::sort(pools.begin(), pools.end());  // attended positions ascend

  const int64_t tail_start = num_pools * kpool;
  attended.reserve(pools.size() * size_t(kpool) + size_t(t + 1 - tail_start));
  for (int32_t p : pools)
    for (int i = 0; i < kpool; ++i) attended.push_back(int32_t(int64_t(p) * kpool + i));
  for (int64_t j = tail_start; j <= t; ++j) attended.push_back(int32_t(j));
  return attended;
}

void pooled_index_key(const float* const* keys, const float* gates, const float* ape, int kpool,
                      int64_t d_i, float* out) {
  float stack[kStackPool];
  std::vector<float> heap(kpool > kStackPool ? size_t(kpool) : 0);
  float* a = kpool > kStackPool ? heap.data() : stack;  // [kpool] pooling weights
  for (int i = 0; i < kpool; ++i) a[i] = gates[i] + ape[i];
  softmax(a, kpool);
  for (int64_t c = 0; c < d_i; ++c) out[c] = 0.0f;
  for (int i = 0; i < kpool; ++i)
    for (int64_t c = 0; c < d_i; ++c) out[c] = std::fma(a[i], keys[i][c], out[c]);
}

std::vector<float> pooled_index_keys(LatentCache& cache, int layer,
                                     const std::vector<int32_t>& block_table, int64_t num_pools,
                                     int kpool, const float* ape, ThreadPool& pool) {
  const int64_t d_i = cache.index_dim();
  std::vector<float> pooled(size_t(num_pools * d_i));  // [num_pools, d_i]
  pool.parallel_for(num_pools, 64, [&](int64_t lo, int64_t hi) {
    std::vector<float> key_rows(static_cast<size_t>(kpool * d_i));  // [kpool, d_i] dequantized
    std::vector<const float*> keys(static_cast<size_t>(kpool));     // kpool pointers to [d_i]
    std::vector<float> gates(static_cast<size_t>(kpool));           // [kpool]
    for (int64_t p = lo; p < hi; ++p) {
      for (int i = 0; i < kpool; ++i) {
        const int64_t j = p * kpool + i;
        cache.load_index_key(layer, block_table, j, &key_rows[size_t(i * d_i)]);
        keys[size_t(i)] = &key_rows[size_t(i * d_i)];
        gates[size_t(i)] = cache.index_gate_at(layer, block_table, j);
      }
      pooled_index_key(keys.data(), gates.data(), ape, kpool, d_i, &pooled[size_t(p * d_i)]);
    }
  });
  return pooled;
}

std::vector<float> index_pool_scores(const float* q_index, const float* head_weights, int n_heads,
                                     int64_t d_i, const float* pooled_keys, int64_t num_pools,
                                     ThreadPool& pool) {
  // All heads against all pools is one small matrix product: the pooled keys play the weight.
  const Linear keys{DType::kF32, num_pools, d_i, pooled_keys};  // [num_pools, d_i]
  std::vector<float> logits(size_t(n_heads * num_pools));       // [I, num_pools]: q_h . K_p
  linear(q_index, n_heads, keys, logits.data(), pool);

  const float norm = 1.0f / std::sqrt(float(d_i * n_heads));
  std::vector<float> scores(size_t(num_pools), 0.0f);  // [num_pools]
  for (int h = 0; h < n_heads; ++h) {
    const float* row = &logits[size_t(h * num_pools)];
    for (int64_t p = 0; p < num_pools; ++p) {
      const float relu = row[p] < 0.0f ? 0.0f : row[p];  // NaN passes through
      scores[size_t(p)] += head_weights[h] * relu;
    }
  }
  for (float& s : scores) s *= norm;
  return scores;
}

}  // namespace sparkglm::cpu
