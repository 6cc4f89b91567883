#include "engine/backend/cpu/cpu_model_runner.h"

#include <algorithm>

#include "engine/backend/cpu/hyper_connections.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/mla_layer.h"
#include "engine/backend/cpu/mlp.h"
#include "engine/backend/cpu/moe_layer.h"
#include "engine/backend/cpu/ops.h"
#include "engine/core/error.h"
#include "engine/dist/vocab_parallel.h"

namespace sparkglm::cpu {

namespace {

std::unique_ptr<WeightShard> shard_for(const ModelConfig& config, const ModelWeights& weights,
                                       const dist::Communicator* comm) {
  if (!comm || comm->world_size() == 1) return nullptr;
  return std::make_unique<WeightShard>(
      shard_weights(config, weights, comm->rank(), comm->world_size()));
}

LatentShard latent_shard(const WeightShard* shard, bool kv_shard) {
  if (!shard || !kv_shard) return {};
  return {shard->rank, shard->world};
}

}  // namespace

CpuModelRunner::CpuModelRunner(const ModelConfig& config, const ModelWeights& weights,
                               const CpuRunnerOptions& options, ThreadPool& pool)
    : config_(config),
      options_(options),
      shard_(shard_for(config, weights, options.comm)),
      local_(shard_ ? shard_->local : config_),
      weights_(shard_ ? shard_->weights : weights),
      pool_(pool),
      cache_(config, options.num_blocks, options.block_size, options.kv_dtype, options.fault,
             latent_shard(shard_.get(), options.kv_shard)),
      states_(local_, options.num_state_slots, options.num_snapshots, options.state_records) {
  if (shard_)
    steps_ = std::make_unique<dist::RankSteps>(
        *options.comm, config_.vocab_size,
        [this](const ForwardBatch& b, ForwardOutput& out) { forward_rows(b, out, false); });
}

void CpuModelRunner::all_reduce(float* data, int64_t n) const {
  if (shard_) options_.comm->all_reduce_sum(data, size_t(n));
}

// The cache's shard, if any, is the communicator's (latent_shard above).
void CpuModelRunner::mla(const MlaWeights& w, int cache_layer, const ForwardBatch& batch,
                         const float* x, float* out) {
  mla_layer_forward(local_, w, cache_layer, batch, cache_, x, out, pool_, options_.fault,
                    options_.comm, options_.selection_trace);
}

void CpuModelRunner::submit(const ForwardBatch& batch, const StepSampling& sampling) {
  if (!steps_) return ModelRunner::submit(batch, sampling);
  steps_->submit(batch, sampling);
}

void CpuModelRunner::collect(StepResult& result) {
  if (!steps_) return ModelRunner::collect(result);
  steps_->collect(result);
}

void CpuModelRunner::embed(const ForwardBatch& batch, float* rows) const {
  const int64_t d = config_.hidden_size;
  for (int32_t r = 0; r < batch.num_rows(); ++r) {
    const int64_t tok = batch.tokens[size_t(r)];
    for (int64_t i = 0; i < d; ++i) rows[r * d + i] = weights_.embed.at(tok, i);
  }
}

void CpuModelRunner::attention(int layer, const LayerWeights& w, const ForwardBatch& batch,
                               const float* x, float* out) {
  const int index = config_.kind_index(layer);
  if (w.kind == LayerKind::kLinearAttention) {
    kda_layer_forward(local_, w.kda, index, batch, states_, x, out, pool_, options_.kda_path);
  } else {
    mla(w.mla, index, batch, x, out);
  }
  all_reduce(out, batch.num_rows() * config_.hidden_size);
}

void CpuModelRunner::ffn(const LayerWeights& w, const float* x, int64_t rows, float* out) {
  if (w.dense_mlp) {
    swiglu_forward(w.mlp, x, rows, out, pool_, /*clamp_limit=*/0.0f);
  } else {
    moe_forward(config_, w.moe, x, rows, out, pool_, shard_ ? shard_->expert_begin : 0,
                shard_ ? shard_->expert_end : -1, options_.fault);
  }
  all_reduce(out, rows * config_.hidden_size);
}

void CpuModelRunner::logits(const ForwardBatch& batch, const float* h, const float* norm,
                            ForwardOutput& out, bool gather) {
  const int64_t d = config_.hidden_size, n = int64_t(batch.logit_rows.size());
  std::vector<float> normed(size_t(n * d));  // [n, D]
  out.hidden.resize(size_t(n * d));
  for (int64_t i = 0; i < n; ++i) {
    const float* row = h + int64_t(batch.logit_rows[size_t(i)]) * d;
    std::copy(row, row + d, out.hidden.begin() + i * d);
    rms_norm(row, norm, config_.rms_norm_eps, d, &normed[size_t(i * d)]);
  }
  const int64_t part = weights_.lm_head.rows;  // vocab, or this rank's range of it
  out.logits.resize(size_t(n * part));         // [n, part]
  linear(normed.data(), n, weights_.lm_head, out.logits.data(), pool_);
  if (!shard_ || !gather) return;
  std::vector<float> full(size_t(n * config_.vocab_size));  // [n, vocab]
  dist::gather_rows(*options_.comm, out.logits.data(), n, part, full.data());
  out.logits = std::move(full);
}

void CpuModelRunner::forward(const ForwardBatch& batch, ForwardOutput& out) {
  forward_rows(batch, out, true);
}

void CpuModelRunner::forward_rows(const ForwardBatch& batch, ForwardOutput& out, bool gather) {
  batch.validate(config_, cache_.block_size(), cache_.num_blocks(), states_.num_slots(),
                 states_.num_snapshots(), states_.state_records());
  for (const auto& s : batch.seqs) {
    if (s.start_position == 0) states_.reset(s.state_slot);
    if (s.restore_snapshot >= 0) states_.restore(s.restore_snapshot, s.state_slot);
    if (s.resume_record >= 0) states_.rewind(s.state_slot, s.resume_record);
  }

  const int64_t t = batch.num_rows(), d = config_.hidden_size, hc = config_.hc_mult;
  std::vector<float> streams(size_t(t * hc * d));  // X: [T, hc, D]
  std::vector<float> y(size_t(t * d));             // mixed input of a block: [T, D]
  std::vector<float> normed(size_t(t * d));        // its pre-norm: [T, D]
  std::vector<float> block_out(size_t(t * d));     // the block's output: [T, D]
  std::vector<float> post(size_t(t * hc));         // [T, hc]
  std::vector<float> comb(size_t(t * hc * hc));    // [T, hc, hc]

  embed(batch, y.data());
  for (int64_t r = 0; r < t; ++r)
    for (int64_t s = 0; s < hc; ++s)
      std::copy_n(&y[size_t(r * d)], d, &streams[size_t((r * hc + s) * d)]);

  auto normalize = [&](const float* w) {
    for (int64_t r = 0; r < t; ++r)
      rms_norm(&y[size_t(r * d)], w, config_.rms_norm_eps, d, &normed[size_t(r * d)]);
  };
  for (int layer = 0; layer < config_.num_hidden_layers; ++layer) {
    const LayerWeights& w = weights_.layers[size_t(layer)];
    hc_pre(config_, w.hc_attn, streams.data(), t, y.data(), post.data(), comb.data(), pool_);
    normalize(w.input_norm);
    attention(layer, w, batch, normed.data(), block_out.data());
    hc_post(config_, streams.data(), block_out.data(), post.data(), comb.data(), t, pool_);

    hc_pre(config_, w.hc_ffn, streams.data(), t, y.data(), post.data(), comb.data(), pool_);
    normalize(w.post_attn_norm);
    ffn(w, normed.data(), t, block_out.data());
    hc_post(config_, streams.data(), block_out.data(), post.data(), comb.data(), t, pool_);
  }
  hc_head(config_, weights_.hc_head, streams.data(), t, y.data(), pool_);  // h: [T, D]
  for (const auto& s : batch.seqs)
    if (s.save_snapshot >= 0) states_.save(s.state_slot, s.save_snapshot);
  logits(batch, y.data(), weights_.final_norm, out, gather);
}

void CpuModelRunner::copy_block_to_host(int32_t block, std::byte* host) {
  run_queued();
  cache_.copy_block_out(block, host);
}

void CpuModelRunner::copy_block_from_host(int32_t block, const std::byte* host) {
  run_queued();
  cache_.copy_block_in(block, host);
}

void CpuModelRunner::copy_snapshot_to_host(int snapshot, std::byte* host) {
  run_queued();
  states_.copy_snapshot_out(snapshot, host);
}

void CpuModelRunner::copy_snapshot_from_host(int snapshot, const std::byte* host) {
  run_queued();
  states_.copy_snapshot_in(snapshot, host);
}

void CpuModelRunner::forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                                 ForwardOutput& out) {
  SPARKGLM_ASSERT(weights_.mtp.has_value(), "forward_mtp on a model without an MTP module");
  batch.validate(config_, cache_.block_size(), cache_.num_blocks(), states_.num_slots());
  const int64_t t = batch.num_rows(), d = config_.hidden_size;
  SPARKGLM_ASSERT(int64_t(hidden.size()) == t * d,
                  "forward_mtp: hidden must be [rows, hidden_size]");
  const MtpWeights& m = *weights_.mtp;

  std::vector<float> e(size_t(t * d)), cat(size_t(t * 2 * d));  // [T, D], [T, 2D]
  embed(batch, e.data());
  for (int64_t r = 0; r < t; ++r) {
    rms_norm(&e[size_t(r * d)], m.enorm, config_.rms_norm_eps, d, &cat[size_t(r * 2 * d)]);
    rms_norm(&hidden[size_t(r * d)], m.hnorm, config_.rms_norm_eps, d, &cat[size_t(r * 2 * d + d)]);
  }
  std::vector<float> z(size_t(t * d)), normed(size_t(t * d)), block_out(size_t(t * d));  // [T, D]
  linear(cat.data(), t, m.eh_proj, z.data(), pool_);

  auto residual = [&](const float* norm, auto&& block) {
    for (int64_t r = 0; r < t; ++r)
      rms_norm(&z[size_t(r * d)], norm, config_.rms_norm_eps, d, &normed[size_t(r * d)]);
    block();
    for (size_t i = 0; i < z.size(); ++i) z[i] += block_out[i];
  };
  const int cache_layer = config_.kind_index(config_.mtp_layer());
  residual(m.layer.input_norm, [&] {
    mla(m.layer.mla, cache_layer, batch, normed.data(), block_out.data());
    all_reduce(block_out.data(), t * d);
  });
  residual(m.layer.post_attn_norm, [&] { ffn(m.layer, normed.data(), t, block_out.data()); });
  logits(batch, z.data(), m.head_norm, out);
}

}  // namespace sparkglm::cpu
