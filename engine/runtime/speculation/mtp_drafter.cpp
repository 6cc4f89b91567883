#include "engine/runtime/speculation/mtp_drafter.h"

#include "engine/core/error.h"

namespace sparkglm {

MtpDrafter::MtpDrafter(ModelRunner& runner) : runner_(runner) {
  if (runner.config().mtp_layer() < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--speculative-tokens: the model has no MTP module (num_nextn_predict_layers 0)");
}

void MtpDrafter::draft(std::vector<DraftJob>& jobs) {
  const int64_t d = runner_.config().hidden_size, vocab = runner_.config().vocab_size;
  // The first call: every job's computed rows, each on its committed next token.
  ForwardBatch batch;
  std::vector<float> hidden;    // [rows, D]
  std::vector<size_t> wanting;  // per logit row: its job
  for (size_t j = 0; j < jobs.size(); ++j) {
    DraftJob& job = jobs[j];
    job.drafts.clear();
    if (job.rows <= 0) continue;
    SPARKGLM_ASSERT(size_t(job.first_position + job.rows) < job.tokens->size(),
                    "MTP drafter: a computed row without its next token");
    const auto first = job.tokens->begin() + job.first_position + 1;
    batch.add_sequence({first, first + job.rows}, job.first_position, job.state_slot,
                       *job.block_table, job.want > 0);
    batch.seqs.back().decode = false;
    hidden.insert(hidden.end(), job.hidden, job.hidden + int64_t(job.rows) * d);
    if (job.want > 0) wanting.push_back(j);
  }
  if (batch.seqs.empty()) return;
  ForwardOutput out;
  runner_.forward_mtp(batch, hidden, out);
  // Then one position on per call, on the last draft and the module's own output state.
  for (int32_t step = 1; !wanting.empty(); ++step) {
    ForwardBatch next;
    std::vector<float> next_hidden;  // [jobs still drafting, D]
    std::vector<size_t> still;
    for (size_t i = 0; i < wanting.size(); ++i) {
      DraftJob& job = jobs[wanting[i]];
      const int32_t token = greedy_token(&out.logits[i * size_t(vocab)], vocab);
      if (token < 0) continue;  // NaN draft logits: no draft is better than a wrong one
      job.drafts.push_back(token);
      if (int32_t(job.drafts.size()) >= job.want) continue;
      next.add_sequence({token}, job.first_position + job.rows - 1 + step, job.state_slot,
                        *job.block_table);
      next_hidden.insert(next_hidden.end(), out.hidden.begin() + int64_t(i) * d,
                         out.hidden.begin() + int64_t(i + 1) * d);
      still.push_back(wanting[i]);
    }
    wanting.swap(still);
    if (wanting.empty()) break;
    out = ForwardOutput{};
    runner_.forward_mtp(next, next_hidden, out);
  }
}

}  // namespace sparkglm
