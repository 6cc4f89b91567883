// The MLA + DSA attention block of the CUDA runner (MODEL.md section 4; cpu::mla_layer_forward).
// Every row's latent, indexer key and pooling gate go into the paged caches first, so a prefill
// row finds all earlier rows of its step. Queries then run in passes of at most kMlaRowChunk rows:
// W_qb and the absorption into q~, attention over the latent pages (every earlier token while the
// query sees at most topk pools, else the indexer's selection), W_vb and W_o.
#include <algorithm>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/latent_store.h"
#include "engine/backend/cuda/mla_absorb.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/backend/cuda/mla_prefill.h"
#include "engine/backend/cuda/projection.h"

namespace sparkglm::cuda {

namespace {

constexpr float kIndexKeyNormEps = 1e-6f;  // MODEL.md: the indexer key LayerNorm's own epsilon

}  // namespace

void CudaModelRunner::mla_block(int cache_layer, const MlaWeights& w, float* out) {
  const int64_t T = step_->rows(), D = config_.hidden_size, R = config_.kv_lora_rank;
  const int64_t di = config_.index_head_dim, ql = config_.q_lora_rank;
  const float eps = config_.rms_norm_eps;
  const uint16_t* x = ws_.normed_bf16;
  const LatentFormat format =
      options_.kv_dtype == KvDtype::kFp8G128 ? LatentFormat::kFp8G128 : LatentFormat::kBF16;

  profile_.mark("mla.cache+q", stream_);
  const DequantWorkspace dq = weights_->dequant_workspace();
  const int64_t dec = step_->decode_rows();
  SPARKGLM_ASSERT(
      w.kv_a.rows == R && w.kv_a.cols == D && w.q_a.rows == ql && w.indexer.wk.rows == di,
      "MLA projections: the config's shapes");
  // The four products of x in one group (one launch for tinyglm-micro's decode rows, projection.h).
  project_step_group(gemm_, dq,
                     {{&w.kv_a, x, ws_.latent},                     // [T, R]
                      {&w.indexer.wk, x, ws_.index_keys},           // [T, di]
                      {&w.indexer.kpool_gate, x, ws_.index_gates},  // [T, 1]
                      {&w.q_a, x, ws_.cq}},                         // [T, ql]
                     dec, T, stream_);
  float* key_pages = caches_.index_keys + cache_layer * caches_.tokens * di;
  float* gate_pages = caches_.index_gates + cache_layer * caches_.tokens;
  const MlaCacheRows rows{step_->page_rows(),
                          ws_.latent,
                          w.kv_a_norm,
                          int(R),
                          format,
                          caches_.latent_layer(cache_layer),
                          ws_.index_keys,
                          w.indexer.k_norm_weight,
                          w.indexer.k_norm_bias,
                          kIndexKeyNormEps,
                          ws_.index_gates,
                          int(di),
                          key_pages,
                          gate_pages,
                          ws_.cq,
                          w.q_a_norm,
                          ws_.cq_bf16,
                          int(ql),
                          eps};
  store_mla_rows(rows, T, stream_);
  // Every pool is made once, by the step that stores its last token, and kept in its block.
  dsa_pool_completed(key_pages, gate_pages, w.indexer.kpool_ape, step_->positions_device(),
                     step_->page_rows(), T, caches_.pooled_layer(cache_layer, int(di)), stream_,
                     int(di));

  profile_.mark("mla.attend", stream_);
  // Decode rows: the dense ones as one pass per chunk, then the sparse ones.
  const int dense = step_->dense_decode_rows(), decode = step_->decode_rows();
  for (int r0 = 0; r0 < dense; r0 += kMlaRowChunk)
    mla_attend(cache_layer, w, r0, std::min(kMlaRowChunk, dense - r0), -1, true, out);
  for (int r0 = dense; r0 < decode; r0 += kMlaRowChunk)
    mla_attend(cache_layer, w, r0, std::min(kMlaRowChunk, decode - r0), -1, true, out);
  for (const StepSequence& s : step_->seqs()) {
    if (s.decode) continue;
    for (int r0 = s.first_row; r0 < s.first_row + s.rows; r0 += kMlaRowChunk)
      mla_attend(cache_layer, w, r0, std::min(kMlaRowChunk, s.first_row + s.rows - r0), s.index,
                 false, out);
  }
}

// Rows [row0, row0 + rows): decode rows (one sequence each, all dense or all sparse), or rows of
// prefill sequence `seq_index` (dense rows first, then sparse ones, by position).
void CudaModelRunner::mla_attend(int cache_layer, const MlaWeights& w, int row0, int rows,
                                 int seq_index, bool decode, float* out) {
  const int H = config_.num_attention_heads, dn = config_.qk_nope_head_dim;
  const int dv = config_.v_head_dim, R = config_.kv_lora_rank, ql = config_.q_lora_rank;
  const int D = config_.hidden_size, I = config_.index_n_heads, di = config_.index_head_dim;
  const int kpool = config_.index_kpool, topk = config_.index_topk_pools();
  const RunnerShape shp = shape();
  const int stride = shp.table_stride;
  const LatentFormat format =
      options_.kv_dtype == KvDtype::kFp8G128 ? LatentFormat::kFp8G128 : LatentFormat::kBF16;
  const uint8_t* pages = caches_.latent_layer(cache_layer);
  const float* pooled_pages = caches_.pooled_layer(cache_layer, di);
  const std::vector<int32_t>& pos = step_->positions();
  const float scale = config_.mla_softmax_scale();

  // A pass holds decode rows only or rows of one prompt piece only: its products take that
  // class's path (gemm.h), whatever the pass's row count.
  const DequantWorkspace dq = weights_->dequant_workspace();
  auto project = [&](const uint16_t* x, int64_t m, const Linear& wt, float* y) {
    if (decode) {
      project_decode(gemm_, wt, x, m, y, stream_);
    } else {
      project_prefill(gemm_, dq, wt, x, m, y, stream_);
    }
  };
  SPARKGLM_ASSERT(!w.kv_b.quantized(), "device weights keep kv_b_proj in BF16");
  // Rows [0, dense_rows) of the pass attend every earlier token; the rest use the indexer.
  int dense_rows = 0;
  while (dense_rows < rows && !step_->is_sparse(pos[size_t(row0 + dense_rows)])) ++dense_rows;
  const int sparse_rows = rows - dense_rows;
  const int s0 = row0 + dense_rows;  // first sparse row of the step
  const ProjectionPart mq{&w.q_b, ws_.cq_bf16 + int64_t(row0) * ql, ws_.mq};         // [rows, H*dn]
  const ProjectionPart iq{&w.indexer.wq_b, ws_.cq_bf16 + int64_t(s0) * ql, ws_.iq};  // [n, I*di]
  const ProjectionPart iw{&w.indexer.weights_proj, ws_.normed_bf16 + int64_t(s0) * D,
                          ws_.iw};  // [n, I]
  // Decode passes group their products (projection.h): with every row sparse (a drafter's
  // chained pass at a long context), the query's and the indexer's in one group.
  const bool grouped_indexer = decode && dense_rows == 0;
  if (grouped_indexer) {
    project_decode_group(gemm_, {mq, iq, iw}, rows, stream_);
  } else {
    project(mq.x, rows, *mq.w, mq.y);
  }
  // Prefill passes take the per-head products on tensor cores, launched at the full pass of
  // kMlaRowChunk rows whatever their count (the rows past `rows` compute unused values), so that
  // cuBLAS picks one kernel for every pass and a row's bits do not depend on how its prompt was
  // cut; decode passes keep the FP32 kernels, bit for bit the CPU's for any row count.
  const bool tensor_cores = !decode;
  if (tensor_cores) {
    mla_absorb_queries_tc(ws_.mq, kMlaRowChunk, H, dn, dv, R, w.kv_b.bf16(), ws_.mq_bf16,
                          ws_.q_tilde, gemm_, stream_);
  } else {
    mla_absorb_queries(ws_.mq, rows, H, dn, dv, R, w.kv_b.bf16(), ws_.q_tilde, stream_);
  }

  const int64_t hr = int64_t(H) * R;

  if (dense_rows > 0) {
    if (decode) {
      MlaDecodeArgs a;
      a.rows = dense_rows;
      a.heads = H;
      a.q_tilde = ws_.q_tilde;
      a.pages = pages;
      a.format = format;
      a.block_size = options_.block_size;
      a.block_table = step_->tables() + int64_t(row0) * stride;  // decode row i = sequence i
      a.table_stride = stride;
      a.lengths = step_->lengths() + row0;
      a.attended = nullptr;
      a.max_len = length_bucket_;
      a.scale = scale;
      a.workspace = ws_.attn_ws;
      a.o_bar = ws_.o_bar;
      a.latent_dim = R;
      mla_decode(a, stream_);
    } else {
      const int start = pos[size_t(row0)];
      MlaPrefillArgs a;
      a.rows = dense_rows;
      a.heads = H;
      a.start = start;
      a.q_tilde = ws_.q_tilde;
      a.pages = pages;
      a.format = format;
      a.block_size = options_.block_size;
      a.block_table = step_->tables() + int64_t(seq_index) * stride;
      a.table_len = (start + dense_rows + options_.block_size - 1) / options_.block_size;
      a.scale = scale;
      a.workspace = ws_.attn_ws;
      a.o_bar = ws_.o_bar;
      a.latent_dim = R;
      mla_prefill(a, stream_);
    }
  }

  if (sparse_rows > 0) {
    if (decode && !grouped_indexer) {
      project_decode_group(gemm_, {iq, iw}, sparse_rows, stream_);
    } else if (!decode) {
      project(iq.x, sparse_rows, *iq.w, iq.y);
      project(iw.x, sparse_rows, *iw.w, iw.y);
    }
    // Scores of the pass's sparse rows against the pool pages through block tables.
    // dsa_pool_scores writes rows max_pools apart, as dsa_select reads them: decode rows (one
    // sequence each: row i reads the table of step sequence s0 + i) over the step's pool bucket,
    // the rows of one prefill chunk against their sequence's pools.
    PooledKeys keys{pooled_pages, nullptr, options_.block_size / kpool};
    int max_pools = 0;  // no row has more pools: how many blocks dsa_select gives each row
    if (decode) {
      // Each row bounded on the device by its own position, so the launch depends on the
      // bucket only (a graph serves every length up to it).
      max_pools = pool_bucket_;
      for (int i = 0; i < sparse_rows; ++i)
        SPARKGLM_ASSERT((pos[size_t(s0 + i)] + 1) / kpool <= max_pools,
                        "a sparse decode row past the step's pool bucket");
      keys.table = step_->tables() + int64_t(s0) * stride;
      keys.table_stride = stride;
      dsa_pool_scores(ws_.iq, ws_.iw, sparse_rows, I, keys, max_pools, ws_.scores, stream_, di,
                      step_->positions_device() + s0);
    } else {
      max_pools = (pos[size_t(row0 + rows - 1)] + 1) / kpool;
      keys.table = step_->tables() + int64_t(seq_index) * stride;
      dsa_pool_scores(ws_.iq, ws_.iw, sparse_rows, I, keys, max_pools, ws_.scores, stream_, di);
    }
    dsa_select(ws_.scores, max_pools, step_->positions_device() + s0, sparse_rows, max_pools, topk,
               ws_.lists, shp.attend_max, ws_.counts, ws_.select_ws, stream_,
               options_.fault == EngineFault::kIndexerTieFlipped);
    if (options_.selection_trace != nullptr) trace_selection(cache_layer, s0, sparse_rows);
    MlaDecodeArgs a;
    a.rows = sparse_rows;
    a.heads = H;
    a.q_tilde = ws_.q_tilde + int64_t(dense_rows) * hr;
    a.pages = pages;
    a.format = format;
    a.block_size = options_.block_size;
    a.block_table = step_->tables() + int64_t(decode ? s0 : seq_index) * stride;
    a.table_stride = decode ? stride : 0;  // a prefill chunk's rows share their sequence's table
    a.lengths = ws_.counts;
    a.attended = ws_.lists;
    a.max_len = shp.attend_max;
    a.scale = scale;
    a.workspace = ws_.attn_ws;
    a.o_bar = ws_.o_bar + int64_t(dense_rows) * hr;
    a.latent_dim = R;
    if (decode) {
      mla_decode(a, stream_);
    } else {
      mla_prefill_lists(a, stream_);  // many long rows: one block per row, no splits
    }
  }

  // W_o reads only the BF16 o, so the tensor-core path writes nothing else (ws_.mo stays stale).
  if (tensor_cores) {
    mla_up_values_tc(ws_.o_bar, kMlaRowChunk, H, dn, dv, R, w.kv_b.bf16(), ws_.o_bar_bf16,
                     ws_.mo_bf16, gemm_, stream_);
  } else {
    mla_up_values(ws_.o_bar, rows, H, dn, dv, R, w.kv_b.bf16(), ws_.mo, ws_.mo_bf16, stream_);
  }
  project(ws_.mo_bf16, rows, w.o_proj, out + int64_t(row0) * D);  // [rows, D]
}

// Step rows [first_row, first_row + rows), the sparse rows of the pass dsa_select just chose for:
// their attended tokens, read back and recorded (a test's diagnostic; the stream waits).
void CudaModelRunner::trace_selection(int cache_layer, int first_row, int rows) {
  const int64_t stride = shape().attend_max;
  std::vector<int32_t> counts(static_cast<size_t>(rows));
  std::vector<int32_t> lists(static_cast<size_t>(rows) * static_cast<size_t>(stride));
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(counts.data(), ws_.counts, counts.size() * 4,
                                      cudaMemcpyDeviceToHost, stream_));
  SPARKGLM_CUDA_CHECK(
      cudaMemcpyAsync(lists.data(), ws_.lists, lists.size() * 4, cudaMemcpyDeviceToHost, stream_));
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<int> slot_of(static_cast<size_t>(step_->rows()));
  for (const StepSequence& s : step_->seqs())
    std::fill_n(slot_of.begin() + s.first_row, s.rows, s.slot);
  for (int i = 0; i < rows; ++i) {
    const int row = first_row + i;
    options_.selection_trace->record(cache_layer, slot_of[size_t(row)],
                                     step_->positions()[size_t(row)],
                                     lists.data() + int64_t(i) * stride, size_t(counts[size_t(i)]));
  }
}

}  // namespace sparkglm::cuda
