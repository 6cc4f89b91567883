#include "engine/backend/cpu/latent_shard_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/weighted_row_sum.h"
#include "engine/core/error.h"

namespace sparkglm::cpu {

namespace {

constexpr int64_t kPartialHead = 2;  // a head's partial: mx, l, then u [R]

// Step 2 for heads [h0, h1) of one row. q_row: [H, R]; partial_row: [H, 2 + R].
void partial_heads(const LatentCache& cache, int layer, const AttendedRow& row, float scale,
                   const float* q_row, int64_t h0, int64_t h1, float* partial_row,
                   ThreadPool& pool) {
  const int64_t r = cache.latent_dim(), width = kPartialHead + r;
  std::vector<int32_t> owned;  // [n]: the attended positions whose latents this rank holds
  for (const int32_t j : row.positions)
    if (cache.owns(j)) owned.push_back(j);
  const int64_t n = int64_t(owned.size());
  if (n == 0) {
    for (int64_t h = h0; h < h1; ++h) {
      float* part = partial_row + h * width;
      part[0] = -std::numeric_limits<float>::infinity();
      std::fill(part + 1, part + width, 0.0f);
    }
    return;
  }
  std::vector<float> latents(size_t(n * r));  // [n, R]
  for (int64_t k = 0; k < n; ++k)
    cache.load_latent(layer, *row.table, owned[size_t(k)], &latents[size_t(k * r)]);
  std::vector<float> p(size_t((h1 - h0) * n));  // [h1-h0, n]: scores, then exp(s - mx)
  linear(q_row + h0 * r, r, h1 - h0, Linear{DType::kF32, n, r, latents.data()}, p.data(), n, pool);
  for (int64_t h = h0; h < h1; ++h) {
    float* ph = &p[size_t((h - h0) * n)];
    for (int64_t k = 0; k < n; ++k) ph[k] = scale * ph[k];
    float mx = ph[0];
    for (int64_t k = 1; k < n; ++k) mx = std::max(mx, ph[k]);
    float sum = 0.0f;
    for (int64_t k = 0; k < n; ++k) {
      ph[k] = std::exp(ph[k] - mx);
      sum += ph[k];
    }
    partial_row[h * width] = mx;
    partial_row[h * width + 1] = sum;
  }
  weighted_row_sum(p.data(), n, h1 - h0, n, latents.data(), r, partial_row + h0 * width + 2, width);
}

}  // namespace

void attend_latent_shard(dist::Communicator& comm, const LatentCache& cache, int layer,
                         std::span<const AttendedRow> rows, int64_t local_heads, float scale,
                         const float* q_tilde, float* o_bar, ThreadPool& pool) {
  const int64_t ranks = comm.world_size(), rank = comm.rank();
  SPARKGLM_ASSERT(cache.shard().ranks == ranks && cache.shard().rank == rank,
                  "latent shard attention: the cache's shard is not the communicator's");
  const int64_t m = int64_t(rows.size()), hl = local_heads, h = hl * ranks;
  const int64_t r = cache.latent_dim(), width = kPartialHead + r;

  // 1. q~ of every head: rank k's heads are [k H_l, (k+1) H_l).
  std::vector<float> gathered(size_t(ranks * m * hl * r));  // [N, m, H_l, R]
  comm.all_gather(q_tilde, size_t(m * hl * r) * sizeof(float), gathered.data());
  std::vector<float> q_all(size_t(m * h * r));  // [m, H, R]
  for (int64_t k = 0; k < ranks; ++k)
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(&gathered[size_t((k * m + i) * hl * r)], hl * r,
                  &q_all[size_t((i * h + k * hl) * r)]);

  // 2. This rank's partials of every head; work items are (row, head) pairs, as in mla_layer.
  std::vector<float> partial(size_t(m * h * width));  // [m, H, 2 + R]
  pool.parallel_for(m * h, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi;) {
      const int64_t i = item / h, h0 = item % h, h1 = std::min(h, h0 + (hi - item));
      partial_heads(cache, layer, rows[size_t(i)], scale, &q_all[size_t(i * h * r)], h0, h1,
                    &partial[size_t(i * h * width)], pool);
      item += h1 - h0;
    }
  });

  // 3. Every rank's partials.
  std::vector<float> all(size_t(ranks * m * h * width));  // [N, m, H, 2 + R]
  comm.all_gather(partial.data(), partial.size() * sizeof(float), all.data());

  // 4. This rank's heads, combined in rank order.
  pool.parallel_for(m * hl, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> acc(static_cast<size_t>(r));  // [R]: sum_k w_k u_k
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t i = item / hl, head = rank * hl + item % hl;
      auto part = [&](int64_t k) { return &all[size_t(((k * m + i) * h + head) * width)]; };
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < ranks; ++k) mx = std::max(mx, part(k)[0]);
      float l = 0.0f;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k = 0; k < ranks; ++k) {
        const float* pk = part(k);
        if (pk[0] == -std::numeric_limits<float>::infinity()) continue;  // owns none of them
        const float w = std::exp(pk[0] - mx);
        l = std::fma(w, pk[1], l);
        for (int64_t e = 0; e < r; ++e) acc[size_t(e)] = std::fma(w, pk[2 + e], acc[size_t(e)]);
      }
      const float inv = 1.0f / l;
      float* out = o_bar + item * r;
      for (int64_t e = 0; e < r; ++e) out[e] = acc[size_t(e)] * inv;
    }
  });
}

}  // namespace sparkglm::cpu
