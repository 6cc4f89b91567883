#include "engine/backend/cpu/mla_layer.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "engine/backend/cpu/dsa_indexer.h"
#include "engine/backend/cpu/latent_shard_attention.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cpu/weighted_row_sum.h"
#include "engine/core/error.h"

namespace sparkglm::cpu {

namespace {

// Rows per pass of the query pipeline: bounds the per-row buffers (q~ and ō are H*R floats a row,
// 128 KiB each at tinyGLM shape) while the projections still see a batch of rows.
constexpr int64_t kRowChunk = 64;
// MODEL.md fixes the indexer key LayerNorm's epsilon independently of rms_norm_eps.
constexpr float kIndexKeyNormEps = 1e-6f;

struct MlaShape {
  int64_t d, h, dn, dv, r, q_lora;  // hidden, heads, nope dim, v dim, kv_lora_rank, q_lora_rank
  int64_t index_heads, index_dim;
  int kpool, topk_pools;
  explicit MlaShape(const ModelConfig& c)
      : d(c.hidden_size),
        h(c.num_attention_heads),
        dn(c.qk_nope_head_dim),
        dv(c.v_head_dim),
        r(c.kv_lora_rank),
        q_lora(c.q_lora_rank),
        index_heads(c.index_n_heads),
        index_dim(c.index_head_dim),
        kpool(c.index_kpool),
        topk_pools(c.index_topk_pools()) {}
  int64_t kv_b_row(int64_t head) const { return head * (dn + dv); }  // first W_kb,h row
  int64_t pools_seen(int64_t t) const { return (t + 1) / kpool; }    // complete pools at t
  bool is_sparse(int64_t t) const { return pools_seen(t) > topk_pools; }
  int64_t first_sparse() const { return (topk_pools + 1) * int64_t(kpool) - 1; }  // least sparse t
};

void check_shapes(const MlaShape& s, const MlaWeights& w, const LatentCache& cache) {
  SPARKGLM_ASSERT(w.q_a.rows == s.q_lora && w.q_a.cols == s.d, "mla: q_a_proj shape");
  SPARKGLM_ASSERT(w.q_b.rows == s.h * s.dn && w.q_b.cols == s.q_lora, "mla: q_b_proj shape");
  SPARKGLM_ASSERT(w.kv_a.rows == s.r && w.kv_a.cols == s.d, "mla: kv_a_proj shape");
  SPARKGLM_ASSERT(w.kv_b.rows == s.h * (s.dn + s.dv) && w.kv_b.cols == s.r, "mla: kv_b_proj shape");
  SPARKGLM_ASSERT(w.o_proj.rows == s.d && w.o_proj.cols == s.h * s.dv, "mla: o_proj shape");
  SPARKGLM_ASSERT(w.indexer.wq_b.rows == s.index_heads * s.index_dim, "mla: indexer wq_b shape");
  SPARKGLM_ASSERT(w.indexer.wk.rows == s.index_dim, "mla: indexer wk shape");
  SPARKGLM_ASSERT(w.indexer.weights_proj.rows == s.index_heads, "mla: indexer weights_proj shape");
  SPARKGLM_ASSERT(w.indexer.kpool_gate.rows == 1, "mla: indexer kpool_gate shape");
  SPARKGLM_ASSERT(cache.latent_dim() == s.r && cache.index_dim() == s.index_dim,
                  "mla: latent cache dims differ from the config");
}

// Writes c_kv (of the positions the cache's shard owns), k^I and the pooling gate of every row of
// the batch into the cache.
void write_cache_rows(const ModelConfig& c, const MlaShape& s, const MlaWeights& w, int layer,
                      const ForwardBatch& batch, LatentCache& cache, const float* x,
                      ThreadPool& pool) {
  const int64_t rows = batch.num_rows();
  std::vector<float> latent(size_t(rows * s.r));       // [T, R]: W_kva x
  std::vector<float> key(size_t(rows * s.index_dim));  // [T, d_i]: W_ik x
  std::vector<float> gate(static_cast<size_t>(rows));  // [T]: W_igate x
  linear(x, rows, w.kv_a, latent.data(), pool);
  linear(x, rows, w.indexer.wk, key.data(), pool);
  linear(x, rows, w.indexer.kpool_gate, gate.data(), pool);
  for (int64_t i = 0; i < rows; ++i) {
    const auto& table = batch.seqs[size_t(batch.row_seq[size_t(i)])].block_table;
    const int64_t pos = batch.positions[size_t(i)];
    float* c_kv = &latent[size_t(i * s.r)];
    float* k_i = &key[size_t(i * s.index_dim)];
    if (cache.owns(pos)) {  // with a KV shard, another rank stores the others
      rms_norm(c_kv, w.kv_a_norm, c.rms_norm_eps, s.r, c_kv);
      cache.store_latent(layer, table, pos, c_kv);
    }
    layer_norm(k_i, w.indexer.k_norm_weight, w.indexer.k_norm_bias, kIndexKeyNormEps, s.index_dim,
               k_i);
    cache.store_index_key(layer, table, pos, k_i);
    cache.index_gate_at(layer, table, pos) = gate[size_t(i)];
  }
}

// q~_h = W_kb,h^T q_h for m rows, summed over dn in increasing order.
// q: [m, H*dn]; q_tilde: [m, H, R].
void absorb_queries(const MlaShape& s, const Linear& kv_b, const float* q, int64_t m,
                    float* q_tilde, ThreadPool& pool) {
  pool.parallel_for(s.h, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t first = s.kv_b_row(h) * s.r;  // W_kb,h [dn, R] is dn consecutive rows of kv_b
      const float* qh = q + h * s.dn;             // [m, dn] with row stride H*dn
      float* out = q_tilde + h * s.r;             // [m, R] with row stride H*R
      if (kv_b.dtype == DType::kBF16) {
        weighted_row_sum(qh, s.h * s.dn, m, s.dn, kv_b.bf16() + first, s.r, out, s.h * s.r);
      } else {
        weighted_row_sum(qh, s.h * s.dn, m, s.dn, kv_b.f32() + first, s.r, out, s.h * s.r);
      }
    }
  });
}

// Attention of one row over its attended positions for heads [h0, h1): q_tilde and o_bar are the
// row's [H, R].
void attend_heads(const MlaShape& s, float scale, const LatentCache& cache, int layer,
                  const AttendedRow& row, const float* q_tilde, int64_t h0, int64_t h1,
                  float* o_bar, ThreadPool& pool) {
  const std::span<const int32_t> attended = row.positions;
  const int64_t n = int64_t(attended.size());
  // The attended latents gathered into one matrix, so that all scores are a single cpu::linear
  // (the same reduction order as cpu::dot, at matrix-product speed).
  std::vector<float> latents(size_t(n * s.r));  // [n, R]
  for (int64_t k = 0; k < n; ++k)
    cache.load_latent(layer, *row.table, attended[size_t(k)], &latents[size_t(k * s.r)]);
  std::vector<float> p(size_t((h1 - h0) * n));  // [h1-h0, n]: scores, then probabilities
  linear(q_tilde + h0 * s.r, s.r, h1 - h0, Linear{DType::kF32, n, s.r, latents.data()}, p.data(), n,
         pool);
  for (int64_t h = h0; h < h1; ++h) {
    float* ph = &p[size_t((h - h0) * n)];
    for (int64_t k = 0; k < n; ++k) ph[k] = scale * ph[k];
    softmax(ph, n);
  }
  weighted_row_sum(p.data(), n, h1 - h0, n, latents.data(), s.r, o_bar + h0 * s.r, s.r);
}

// The attended positions of rows [r0, r0+m) that see more than topk pools (empty for the others).
// c_q: [m, q_lora] of those rows; pooled: per sequence [pools, d_i].
std::vector<std::vector<int32_t>> select_sparse_rows(const MlaShape& s, const MlaWeights& w,
                                                     const ForwardBatch& batch, int64_t r0,
                                                     int64_t m, const float* x, const float* c_q,
                                                     const std::vector<std::vector<float>>& pooled,
                                                     ThreadPool& pool, EngineFault fault) {
  std::vector<std::vector<int32_t>> attended(static_cast<size_t>(m));
  std::vector<int64_t> sparse;  // chunk-local rows that need the indexer
  for (int64_t i = 0; i < m; ++i)
    if (s.is_sparse(batch.positions[size_t(r0 + i)])) sparse.push_back(i);
  if (sparse.empty()) return attended;

  const int64_t ns = int64_t(sparse.size());
  std::vector<float> xs(size_t(ns * s.d));        // [S, D]: the sparse rows of x
  std::vector<float> cqs(size_t(ns * s.q_lora));  // [S, q_lora]: their c_q
  for (int64_t k = 0; k < ns; ++k) {
    std::copy_n(x + (r0 + sparse[size_t(k)]) * s.d, s.d, &xs[size_t(k * s.d)]);
    std::copy_n(c_q + sparse[size_t(k)] * s.q_lora, s.q_lora, &cqs[size_t(k * s.q_lora)]);
  }
  const int64_t qi_width = s.index_heads * s.index_dim;
  std::vector<float> q_index(size_t(ns * qi_width));            // [S, I*d_i]: q^I
  std::vector<float> head_weights(size_t(ns * s.index_heads));  // [S, I]: w_h
  linear(cqs.data(), ns, w.indexer.wq_b, q_index.data(), pool);
  linear(xs.data(), ns, w.indexer.weights_proj, head_weights.data(), pool);

  pool.parallel_for(ns, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t row = r0 + sparse[size_t(k)];
      const int64_t t = batch.positions[size_t(row)];
      const auto& keys = pooled[size_t(batch.row_seq[size_t(row)])];  // [>= P, d_i]
      const std::vector<float> scores = index_pool_scores(
          &q_index[size_t(k * qi_width)], &head_weights[size_t(k * s.index_heads)],
          int(s.index_heads), s.index_dim, keys.data(), s.pools_seen(t), pool);
      attended[size_t(sparse[size_t(k)])] =
          select_attended(scores, t, s.kpool, s.topk_pools, fault);
    }
  });
  return attended;
}

// Rows [r0, r0+m): queries, selection, attention and output projection into out [m, D].
void attend_chunk(const ModelConfig& c, const MlaShape& s, const MlaWeights& w, int layer,
                  const ForwardBatch& batch, LatentCache& cache, int64_t r0, int64_t m,
                  const float* x, const std::vector<std::vector<float>>& pooled,
                  std::span<const int32_t> all_positions, float* out, ThreadPool& pool,
                  EngineFault fault, dist::Communicator* comm, SelectionTrace* trace) {
  std::vector<float> c_q(size_t(m * s.q_lora));  // [m, q_lora]
  linear(x + r0 * s.d, m, w.q_a, c_q.data(), pool);
  for (int64_t i = 0; i < m; ++i) {
    float* row = &c_q[size_t(i * s.q_lora)];
    rms_norm(row, w.q_a_norm, c.rms_norm_eps, s.q_lora, row);
  }
  std::vector<float> q(size_t(m * s.h * s.dn));  // [m, H*dn]
  linear(c_q.data(), m, w.q_b, q.data(), pool);
  std::vector<float> q_tilde(size_t(m * s.h * s.r));  // [m, H, R]
  absorb_queries(s, w.kv_b, q.data(), m, q_tilde.data(), pool);

  const std::vector<std::vector<int32_t>> sparse_sets =
      select_sparse_rows(s, w, batch, r0, m, x, c_q.data(), pooled, pool, fault);
  if (trace != nullptr)
    for (int64_t i = 0; i < m; ++i)
      if (s.is_sparse(batch.positions[size_t(r0 + i)]))
        trace->record(layer, batch.seqs[size_t(batch.row_seq[size_t(r0 + i)])].state_slot,
                      batch.positions[size_t(r0 + i)], sparse_sets[size_t(i)].data(),
                      sparse_sets[size_t(i)].size());

  std::vector<AttendedRow> rows(static_cast<size_t>(m));  // [m]
  for (int64_t i = 0; i < m; ++i) {
    const int64_t t = batch.positions[size_t(r0 + i)];
    rows[size_t(i)].table = &batch.seqs[size_t(batch.row_seq[size_t(r0 + i)])].block_table;
    rows[size_t(i)].positions = s.is_sparse(t) ? std::span<const int32_t>(sparse_sets[size_t(i)])
                                               : all_positions.first(size_t(t + 1));
  }
  const float scale = c.mla_softmax_scale();
  std::vector<float> o_bar(size_t(m * s.h * s.r));  // [m, H, R]
  if (cache.shard().ranks > 1) {
    SPARKGLM_ASSERT(comm != nullptr, "mla: a KV shard needs its ranks' communicator");
    attend_latent_shard(*comm, cache, layer, rows, s.h, scale, q_tilde.data(), o_bar.data(), pool);
  } else {
    // Work items are (row, head) pairs so that a single decode row still spreads over threads.
    pool.parallel_for(m * s.h, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t item = lo; item < hi;) {
        const int64_t i = item / s.h, h0 = item % s.h, h1 = std::min(s.h, h0 + (hi - item));
        attend_heads(s, scale, cache, layer, rows[size_t(i)], &q_tilde[size_t(i * s.h * s.r)], h0,
                     h1, &o_bar[size_t(i * s.h * s.r)], pool);
        item += h1 - h0;
      }
    });
  }

  std::vector<float> o(size_t(m * s.h * s.dv));  // [m, H*dv]: concat_h W_vb,h ō_h
  pool.parallel_for(s.h, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t v0 = s.kv_b_row(h) + s.dn;  // W_vb,h follows W_kb,h
      linear_slice(&o_bar[size_t(h * s.r)], s.h * s.r, m, w.kv_b, v0, v0 + s.dv,
                   &o[size_t(h * s.dv)], s.h * s.dv, pool);
    }
  });
  linear(o.data(), m, w.o_proj, out + r0 * s.d, pool);
}

}  // namespace

void mla_layer_forward(const ModelConfig& c, const MlaWeights& w, int cache_layer,
                       const ForwardBatch& batch, LatentCache& cache, const float* x, float* out,
                       ThreadPool& pool, EngineFault fault, dist::Communicator* comm,
                       SelectionTrace* trace) {
  const MlaShape s(c);
  check_shapes(s, w, cache);
  const int64_t rows = batch.num_rows();
  if (rows == 0) return;

  // Every row's cache entries first: a prefill row then finds all earlier rows of its step.
  write_cache_rows(c, s, w, cache_layer, batch, cache, x, pool);

  // Pooled keys depend only on cached tokens, so each sequence computes them once per step for
  // the most pools any of its rows sees; rows seeing fewer read a prefix.
  std::vector<std::vector<float>> pooled(batch.seqs.size());  // per sequence [pools, d_i]
  int64_t max_dense = 0;                                      // the last position of any dense row
  for (size_t q = 0; q < batch.seqs.size(); ++q) {
    const SequenceSlice& seq = batch.seqs[q];
    const int64_t last = int64_t(seq.start_position) + seq.num_rows - 1;
    if (seq.start_position < s.first_sparse())
      max_dense = std::max(max_dense, std::min(last, s.first_sparse() - 1));
    if (s.is_sparse(last))
      pooled[q] = pooled_index_keys(cache, cache_layer, seq.block_table, s.pools_seen(last),
                                    s.kpool, w.indexer.kpool_ape, pool);
  }
  // Dense rows attend 0..t: one shared ascending list serves every such row as a prefix.
  std::vector<int32_t> all_positions(size_t(max_dense + 1));  // [max dense t + 1]
  for (size_t j = 0; j < all_positions.size(); ++j) all_positions[j] = int32_t(j);

  for (int64_t r0 = 0; r0 < rows; r0 += kRowChunk)
    attend_chunk(c, s, w, cache_layer, batch, cache, r0, std::min(kRowChunk, rows - r0), x, pooled,
                 all_positions, out, pool, fault, comm, trace);
}

}  // namespace sparkglm::cpu
