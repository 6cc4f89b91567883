#include "engine/runtime/speculation/mtp_drafter.h"

#include <vector>

#include "engine/core/error.h"
#include "engine/model/step_sampling.h"

namespace sparkglm {

namespace {

// The module's greedy pick at a chain's tip, among the tokens the job's grammar allows there (when
// it has one, which then accepts the pick); -1 when nothing can be picked. The mask is filled into
// the job's room for it (DraftJob::masks) when it has one, as the mask of its next draft.
int32_t pick(DraftJob& job, const float* logits, int64_t vocab, std::vector<uint32_t>& mask) {
  if (!job.grammar) return greedy_token(logits, vocab);
  const size_t i = job.drafts.size();
  if (job.masks && job.masks->size() <= i) job.masks->resize(i + 1);
  std::vector<uint32_t>& m = job.masks ? (*job.masks)[i] : mask;
  const int32_t token = greedy_token(logits, vocab, job.grammar->fill_mask(m));
  if (token < 0 || !job.grammar->accept_token(token)) return -1;
  if (job.masks) job.masks_made = int32_t(i + 1);
  return token;
}

// A job's drafts from its verify step's chain (DraftJob::step_chain), when the chain's first
// token is this drafter's pick of the step's row (what the chain's passes went on from) and it
// has no grammar to draft under; false: the job is drafted here as without a chain.
bool take_step_chain(DraftJob& job, int64_t vocab) {
  if (!job.step_chain || job.grammar || job.step_chain_tokens < 1 ||
      job.step_chain[0] != greedy_token(job.step_logits, vocab))
    return false;
  for (int32_t i = 0; i < job.step_chain_tokens && i < job.want && job.step_chain[i] >= 0; ++i)
    job.drafts.push_back(job.step_chain[i]);
  return true;
}

// Rolls each job's grammar back over the drafts it accepted, however drafting ends.
struct GrammarRestore {
  std::vector<DraftJob>& jobs;
  ~GrammarRestore() {
    for (DraftJob& job : jobs)
      if (job.grammar) job.grammar->rollback(int(job.drafts.size()));
  }
};

}  // namespace

MtpDrafter::MtpDrafter(ModelRunner& runner) : runner_(runner) {
  if (runner.config().mtp_layer() < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--speculative-tokens: the model has no MTP module (num_nextn_predict_layers 0)");
}

void MtpDrafter::draft(std::vector<DraftJob>& jobs) {
  const int64_t d = runner_.config().hidden_size, vocab = runner_.config().vocab_size;
  // The first call: every job's computed rows, each on its committed next token (none for a job
  // whose verify step ran them already).
  ForwardBatch batch;
  std::vector<float> hidden;  // [rows, D]
  struct Chain {              // a job still drafting: the module's logits and state at its tip
    size_t job;
    const float* logits;
    const float* hidden;
  };
  std::vector<Chain> wanting;
  std::vector<size_t> from_call;  // jobs whose tip is a logit row of the first call, in order
  for (DraftJob& job : jobs) {
    job.drafts.clear();
    job.masks_made = 0;
  }
  const GrammarRestore restore{jobs};
  std::vector<uint32_t> mask;
  for (size_t j = 0; j < jobs.size(); ++j) {
    DraftJob& job = jobs[j];
    if (job.rows <= 0) continue;
    SPARKGLM_ASSERT(size_t(job.first_position + job.rows) < job.tokens->size(),
                    "MTP drafter: a computed row without its next token");
    if (job.step_logits) {
      if (job.want > 0 && !take_step_chain(job, vocab))
        wanting.push_back({j, job.step_logits, job.step_hidden});
      continue;
    }
    const auto first = job.tokens->begin() + job.first_position + 1;
    batch.add_sequence({first, first + job.rows}, job.first_position, job.state_slot,
                       *job.block_table, job.want > 0);
    batch.seqs.back().decode = false;
    hidden.insert(hidden.end(), job.hidden, job.hidden + int64_t(job.rows) * d);
    if (job.want > 0) from_call.push_back(j);
  }
  ForwardOutput out;
  if (!batch.seqs.empty()) runner_.forward_mtp(batch, hidden, out);
  for (size_t i = 0; i < from_call.size(); ++i)
    wanting.push_back({from_call[i], &out.logits[i * size_t(vocab)], &out.hidden[i * size_t(d)]});
  // Then one position on per call, on the last draft and the module's own output state.
  for (int32_t step = 1; !wanting.empty(); ++step) {
    ForwardBatch next;
    std::vector<float> next_hidden;  // [jobs still drafting, D]
    std::vector<size_t> still;
    for (const Chain& c : wanting) {
      DraftJob& job = jobs[c.job];
      // NaN draft logits, or nothing the grammar allows: no draft is better than a wrong one.
      const int32_t token = pick(job, c.logits, vocab, mask);
      if (token < 0) continue;
      job.drafts.push_back(token);
      if (int32_t(job.drafts.size()) >= job.want) continue;
      next.add_sequence({token}, job.first_position + job.rows - 1 + step, job.state_slot,
                        *job.block_table);
      next_hidden.insert(next_hidden.end(), c.hidden, c.hidden + d);
      still.push_back(c.job);
    }
    if (still.empty()) break;
    ForwardOutput chained;
    runner_.forward_mtp(next, next_hidden, chained);
    out = std::move(chained);
    wanting.clear();
    for (size_t i = 0; i < still.size(); ++i)
      wanting.push_back({still[i], &out.logits[i * size_t(vocab)], &out.hidden[i * size_t(d)]});
  }
}

}  // namespace sparkglm
