#include "engine/model/model_runner.h"

#include "engine/core/error.h"

namespace sparkglm {

void ModelRunner::submit(const ForwardBatch& batch, const StepSampling& sampling) {
  SPARKGLM_ASSERT(queued_.size() < 2, "ModelRunner::submit: two steps are already queued");
  queued_.emplace_back();
  queued_.back().batch = batch;
  queued_.back().sampling = sampling;
}

void ModelRunner::collect(StepResult& result) {
  SPARKGLM_ASSERT(!queued_.empty(), "ModelRunner::collect: no step is queued");
  QueuedStep q = std::move(queued_.front());
  queued_.pop_front();
  if (!q.ran) run(q);
  if (q.failure) std::rethrow_exception(q.failure);
  result = std::move(q.result);
}

void ModelRunner::run_queued() {
  for (QueuedStep& q : queued_) {
    if (!q.ran) run(q);
    if (q.failure) return;
  }
}

void ModelRunner::run(QueuedStep& q) {
  q.ran = true;
  try {
    step(q.batch, q.sampling, q.result);
  } catch (...) {
    q.failure = std::current_exception();
  }
}

void ModelRunner::copy_block_to_host(int32_t, std::byte*) {
  SPARKGLM_ASSERT(false, "ModelRunner: this runner has no host copies of cache blocks");
}
void ModelRunner::copy_block_from_host(int32_t, const std::byte*) {
  SPARKGLM_ASSERT(false, "ModelRunner: this runner has no host copies of cache blocks");
}
void ModelRunner::copy_snapshot_to_host(int, std::byte*) {
  SPARKGLM_ASSERT(false, "ModelRunner: this runner has no host copies of KDA snapshots");
}
void ModelRunner::copy_snapshot_from_host(int, const std::byte*) {
  SPARKGLM_ASSERT(false, "ModelRunner: this runner has no host copies of KDA snapshots");
}

void ModelRunner::step(ForwardBatch& batch, const StepSampling& sampling, StepResult& result) {
  for (size_t r = 0; r < sampling.token_from.size(); ++r) {
    const int32_t from = sampling.token_from[r];
    if (from < 0) continue;
    SPARKGLM_ASSERT(size_t(from) < last_tokens_.size(),
                    "ModelRunner: token_from names a row the previous step did not return");
    batch.tokens[r] = last_tokens_[size_t(from)] < 0 ? 0 : last_tokens_[size_t(from)];
  }
  last_tokens_.clear();
  ForwardOutput out;
  forward(batch, out);
  const int64_t n = int64_t(batch.logit_rows.size()), vocab = config().vocab_size;
  std::vector<uint32_t> masks;
  if (sampling.fill_masks && sampling.mask_rows() > 0) {
    masks.resize(size_t(sampling.mask_rows()) * size_t(sampling.mask_words));
    sampling.fill_masks(masks.data());
  }
  result.tokens.assign(size_t(n), -1);
  for (int64_t i = 0; i < n; ++i)
    if (sampling.picks(int(i))) {
      SPARKGLM_ASSERT(sampling.draws[size_t(i)].temperature == 0.0f,
                      "ModelRunner: the host-picking default draws greedy rows only");
      if (i < int64_t(sampling.mask_row.size()) && sampling.mask_row[size_t(i)] >= 0)
        apply_token_mask(&masks[size_t(sampling.mask_row[size_t(i)]) * size_t(sampling.mask_words)],
                         &out.logits[size_t(i * vocab)], vocab);
      result.tokens[size_t(i)] = greedy_token(&out.logits[size_t(i * vocab)], vocab);
    }
  if (sampling.draft_on_picks) draft_on_picks(batch, out, result);
  result.logits = std::move(out.logits);
  result.hidden = std::move(out.hidden);
  last_tokens_ = result.tokens;
}

void ModelRunner::draft_on_picks(const ForwardBatch& batch, const ForwardOutput& out,
                                 StepResult& result) {
  const int64_t n = int64_t(batch.logit_rows.size()), vocab = config().vocab_size;
  if (config().mtp_layer() < 0 || n != batch.num_rows()) return;
  std::vector<int32_t> picks(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (batch.logit_rows[size_t(i)] != int32_t(i)) return;  // rows out of order: not asked for
    picks[size_t(i)] = greedy_token(&out.logits[size_t(i * vocab)], vocab);
    if (picks[size_t(i)] < 0) return;  // no token to embed: the drafter's own path decides
  }
  // Each slice again at its positions, its rows now on the picks (MtpDrafter's first call).
  ForwardBatch mtp;
  for (const SequenceSlice& s : batch.seqs) {
    const auto first = picks.begin() + s.first_row;
    mtp.add_sequence({first, first + s.num_rows}, s.start_position, s.state_slot, s.block_table,
                     /*want_logits=*/true, /*all_logits=*/true);
    mtp.seqs.back().decode = false;
  }
  ForwardOutput drafts;
  forward_mtp(mtp, out.hidden, drafts);
  result.draft_tokens = std::move(picks);
  result.draft_logits = std::move(drafts.logits);
  result.draft_hidden = std::move(drafts.hidden);
}

}  // namespace sparkglm
