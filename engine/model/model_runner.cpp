#include "engine/model/model_runner.h"

#include <algorithm>

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

void ModelRunner::collect_main(StepResult& main) {
  SPARKGLM_ASSERT(main_rows_early() && !queued_.empty() && !queued_.back().main_taken &&
                      queued_.back().sampling.draft_chain > 0,
                  "ModelRunner::collect_main: the step just submitted runs no chain");
  QueuedStep& q = queued_.back();
  if (!q.ran) run(q);
  if (q.failure) std::rethrow_exception(q.failure);  // the step is still collected after
  q.main_taken = true;
  main.take_main_rows(q.result);
  const size_t rows = main.tokens.size();
  main.draft_chain_width = rows > 0 ? int32_t(q.result.draft_chain.size() / rows) : 0;
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
  // Rows whose token the previous step picked (token_from) or chained (chain_from); a missing
  // one (-1) feeds token 0.
  auto take = [&](const std::vector<int32_t>& from, const std::vector<int32_t>& source,
                  const char* what) {
    for (size_t r = 0; r < from.size(); ++r) {
      if (from[r] < 0) continue;
      SPARKGLM_ASSERT(size_t(from[r]) < source.size(), what);
      batch.tokens[r] = std::max(source[size_t(from[r])], 0);
    }
  };
  take(sampling.token_from, last_tokens_,
       "ModelRunner: token_from names a row the previous step did not return");
  take(sampling.chain_from, last_chain_,
       "ModelRunner: chain_from names a draft the previous step did not chain");
  last_tokens_.clear();
  last_chain_.clear();
  ForwardOutput out;
  if (sampling.mtp_next.empty()) {
    forward(batch, out);
  } else {
    forward_with_prompt_drafts(batch, sampling.mtp_next, out, result);
  }
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
  if (sampling.draft_chain > 0 && !result.draft_logits.empty())
    draft_chain(batch, sampling.draft_chain, result);
  result.logits = std::move(out.logits);
  result.hidden = std::move(out.hidden);
  last_tokens_ = result.tokens;
  last_chain_ = result.draft_chain;
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

void ModelRunner::forward_with_prompt_drafts(const ForwardBatch& batch,
                                             const std::vector<int32_t>& next, ForwardOutput& out,
                                             StepResult& result) {
  const int64_t rows = batch.num_rows(), n = int64_t(batch.logit_rows.size());
  const int64_t vocab = config().vocab_size, d = config().hidden_size;
  SPARKGLM_ASSERT(int64_t(next.size()) == rows,
                  "StepSampling::mtp_next must have one entry per row");
  ForwardBatch all = batch;  // every row's hidden state, for the module
  all.logit_rows.resize(size_t(rows));
  for (int64_t r = 0; r < rows; ++r) all.logit_rows[size_t(r)] = int32_t(r);
  ForwardOutput every;
  forward(all, every);
  out.logits.resize(size_t(n * vocab));
  out.hidden.resize(size_t(n * d));
  std::vector<int32_t> logit_of(size_t(rows), -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = batch.logit_rows[size_t(i)];
    logit_of[size_t(r)] = int32_t(i);
    std::copy_n(&every.logits[size_t(r * vocab)], vocab, &out.logits[size_t(i * vocab)]);
    std::copy_n(&every.hidden[size_t(r * d)], d, &out.hidden[size_t(i * d)]);
  }
  ForwardBatch mtp = batch;  // the same slices and logit rows, each row on its next token
  for (int64_t r = 0; r < rows; ++r) {
    int32_t t = next[size_t(r)];
    if (t < 0) {
      SPARKGLM_ASSERT(logit_of[size_t(r)] >= 0,
                      "StepSampling::mtp_next: a pick (-1) asked at a row that is not a logit row");
      t = greedy_token(&every.logits[size_t(r * vocab)], vocab);
    }
    mtp.tokens[size_t(r)] = std::max(t, 0);  // no pick (NaN logits): its drafts are not used
  }
  for (SequenceSlice& s : mtp.seqs) {  // the module's rows, as the drafter's first call has them
    s.decode = false;
    s.restore_snapshot = s.save_snapshot = -1;
    s.record_states = false;
    s.record_before_row = -1;
    s.resume_record = -1;
  }
  ForwardOutput drafts;
  forward_mtp(mtp, every.hidden, drafts);
  result.draft_tokens.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    result.draft_tokens[size_t(i)] = mtp.tokens[size_t(batch.logit_rows[size_t(i)])];
  result.draft_logits = std::move(drafts.logits);
  result.draft_hidden = std::move(drafts.hidden);
}

void ModelRunner::draft_chain(const ForwardBatch& batch, int passes, StepResult& result) {
  const int64_t vocab = config().vocab_size, d = config().hidden_size;
  const int block_size = cache_geometry().block_size;
  for (const SequenceSlice& s : batch.seqs)
    if (int64_t(s.block_table.size()) * block_size <= s.start_position + s.num_rows - 1 + passes)
      return;
  const int width = passes + 1;
  std::vector<int32_t> chain(size_t(batch.num_rows()) * size_t(width), -1);
  struct Tip {
    int32_t* tokens;  // the row's chain
    int32_t position;
    const SequenceSlice* slice;
  };
  std::vector<Tip> tips;
  std::vector<float> hidden;  // [tips, D]
  for (const SequenceSlice& s : batch.seqs) {
    // The drafts accepted: the pick at the row before a draft is that draft (logit row = row).
    int accepted = 0;
    while (accepted + 1 < s.num_rows && result.draft_tokens[size_t(s.first_row + accepted)] ==
                                            batch.tokens[size_t(s.first_row + accepted + 1)])
      ++accepted;
    const int64_t row = s.first_row + accepted;
    int32_t* tokens = &chain[size_t(row * width)];
    tokens[0] = greedy_token(&result.draft_logits[size_t(row * vocab)], vocab);
    if (tokens[0] < 0) continue;
    tips.push_back({tokens, s.start_position + accepted, &s});
    hidden.insert(hidden.end(), result.draft_hidden.begin() + row * d,
                  result.draft_hidden.begin() + (row + 1) * d);
  }
  for (int pass = 1; pass <= passes && !tips.empty(); ++pass) {
    ForwardBatch next;
    for (const Tip& t : tips)
      next.add_sequence({t.tokens[pass - 1]}, t.position + pass, t.slice->state_slot,
                        t.slice->block_table);
    ForwardOutput out;
    forward_mtp(next, hidden, out);
    std::vector<Tip> going;
    std::vector<float> going_hidden;
    for (size_t i = 0; i < tips.size(); ++i) {
      tips[i].tokens[pass] = greedy_token(&out.logits[i * size_t(vocab)], vocab);
      if (tips[i].tokens[pass] < 0) continue;
      going.push_back(tips[i]);
      going_hidden.insert(going_hidden.end(), out.hidden.begin() + int64_t(i) * d,
                          out.hidden.begin() + int64_t(i + 1) * d);
    }
    tips = std::move(going);
    hidden = std::move(going_hidden);
  }
  result.draft_chain = std::move(chain);
}

}  // namespace sparkglm
