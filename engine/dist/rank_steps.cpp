#include "engine/dist/rank_steps.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/dist/vocab_parallel.h"

namespace sparkglm::dist {

RankSteps::RankSteps(Communicator& comm, int64_t vocab, ForwardShard forward_shard)
    : comm_(comm), vocab_(vocab), forward_shard_(std::move(forward_shard)) {}

void RankSteps::submit(const ForwardBatch& batch, const StepSampling& sampling) {
  SPARKGLM_ASSERT(queued_.size() < 2, "RankSteps::submit: two steps are already queued");
  queued_.emplace_back(batch, sampling);
}

void RankSteps::collect(StepResult& result) {
  SPARKGLM_ASSERT(!queued_.empty(), "RankSteps::collect: no step is queued");
  ForwardBatch batch = std::move(queued_.front().first);
  const StepSampling sampling = std::move(queued_.front().second);
  queued_.pop_front();
  for (size_t r = 0; r < sampling.token_from.size(); ++r) {
    const int32_t from = sampling.token_from[r];
    if (from < 0) continue;
    SPARKGLM_ASSERT(size_t(from) < last_tokens_.size(),
                    "RankSteps: token_from names a row the previous step did not return");
    batch.tokens[r] = std::max(last_tokens_[size_t(from)], 0);
  }
  ForwardOutput out;
  forward_shard_(batch, out);
  const int64_t n = int64_t(batch.logit_rows.size()), vl = vocab_ / comm_.world_size();
  SPARKGLM_ASSERT(int64_t(out.logits.size()) == n * vl, "RankSteps: the forward's logit shard");
  auto masked = [&](int64_t i) {
    return i < int64_t(sampling.mask_row.size()) && sampling.mask_row[size_t(i)] >= 0;
  };
  std::vector<int64_t> greedy, whole;  // rows picked across ranks; rows gathered
  for (int64_t i = 0; i < n; ++i) {
    if (sampling.picks(int(i)))
      SPARKGLM_ASSERT(sampling.draws[size_t(i)].temperature == 0.0f,
                      "RankSteps: the runner draws greedy rows only");
    (sampling.picks(int(i)) && !masked(i) ? greedy : whole).push_back(i);
  }
  auto pack = [&](const std::vector<int64_t>& rows) {
    std::vector<float> part(rows.size() * size_t(vl));  // [rows, vl]
    for (size_t k = 0; k < rows.size(); ++k)
      std::copy_n(&out.logits[size_t(rows[k] * vl)], vl, &part[k * size_t(vl)]);
    return part;
  };
  result.tokens.assign(size_t(n), -1);
  result.logits.assign(size_t(n * vocab_), 0.0f);  // [n, vocab]; greedy rows are left zero
  if (!greedy.empty()) {
    const std::vector<int32_t> picks =
        greedy_picks(comm_, pack(greedy).data(), int64_t(greedy.size()), vl);
    for (size_t k = 0; k < greedy.size(); ++k) result.tokens[size_t(greedy[k])] = picks[k];
  }
  if (!whole.empty()) {
    std::vector<float> full(whole.size() * size_t(vocab_));  // [whole, vocab]
    gather_rows(comm_, pack(whole).data(), int64_t(whole.size()), vl, full.data());
    for (size_t k = 0; k < whole.size(); ++k)
      std::copy_n(&full[k * size_t(vocab_)], vocab_, &result.logits[size_t(whole[k] * vocab_)]);
  }
  if (comm_.rank() == 0 && sampling.fill_masks && sampling.mask_rows() > 0) {
    std::vector<uint32_t> masks(size_t(sampling.mask_rows()) * size_t(sampling.mask_words));
    sampling.fill_masks(masks.data());
    for (int64_t i : whole)
      if (sampling.picks(int(i)) && masked(i)) {
        float* row = &result.logits[size_t(i * vocab_)];
        apply_token_mask(&masks[size_t(sampling.mask_row[size_t(i)]) * size_t(sampling.mask_words)],
                         row, vocab_);
        result.tokens[size_t(i)] = greedy_token(row, vocab_);
      }
  }
  comm_.broadcast(result.tokens.data(), result.tokens.size() * sizeof(int32_t), 0);
  last_tokens_ = result.tokens;
  result.hidden = std::move(out.hidden);  // the same on every rank: it follows the all-reduces
}

}  // namespace sparkglm::dist
