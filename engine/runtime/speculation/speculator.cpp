#include "engine/runtime/speculation/speculator.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/runtime/speculation/draft_check.h"

namespace sparkglm {

Speculator::Speculator(int tokens, SpeculativeRollback rollback, std::unique_ptr<Drafter> drafter,
                       const ModelConfig& config, BlockAllocator& blocks, int block_size,
                       int max_seq_len, Emit emit, bool draft_in_step, bool chain_in_step)
    : tokens_(tokens),
      rollback_(rollback),
      drafter_(std::move(drafter)),
      config_(config),
      blocks_(blocks),
      block_size_(block_size),
      max_seq_len_(max_seq_len),
      emit_(std::move(emit)) {
  drafts_in_step_ = draft_in_step && drafter_ && drafter_->reads_step_drafts();
  chains_in_step_ = drafts_in_step_ && chain_in_step && tokens > 1 && drafter_->reads_step_chains();
  SPARKGLM_ASSERT(tokens >= 1 && tokens <= kMaxSpeculativeTokens && drafter_,
                  "Speculator: 1..4 tokens and a drafter");
}

bool Speculator::applies_to(const Sequence& s) const {
  const SamplingParams& p = s.request.sampling;
  // An answer (the prefix cache's) only prefills: no token, no sampler, nothing to draft.
  return !s.answer && !s.request.disable_speculation && (p.greedy() || !p.logprobs);
}

int Speculator::chain_passes(const Sequence& s) const {
  if (!chains_in_step_ || s.matcher || !s.sampler->raw_greedy_at(s.generated())) return 0;
  return tokens_ - 1;
}

const uint32_t* Speculator::grammar_mask(const Sequence& s, int row) {
  if (!s.matcher) return nullptr;
  if (row >= 0 && row < s.draft_masks_made && row < int(s.drafts.size())) {
    ++counters_.reused_masks;
    return s.draft_masks[size_t(row)].data();
  }
  return s.matcher->fill_mask(mask_);
}

int Speculator::add_verify_slice(Sequence& s, ForwardBatch& batch) {
  SPARKGLM_ASSERT(size_t(s.computed) + 1 == s.tokens.size(),
                  "Speculator: a verify slice starts at the sequence's last token");
  const bool recompute = rollback_ == SpeculativeRollback::kRecompute;
  // Rolling back by recompute: the rows of the last verify slice that were accepted run again.
  const int replay = recompute && s.rewind_row >= 0 ? s.rewind_row + 1 : 0;
  const int start = s.computed - replay;
  std::vector<int32_t> rows(s.tokens.begin() + start, s.tokens.end());
  rows.insert(rows.end(), s.drafts.begin(), s.drafts.end());
  batch.add_sequence(rows, start, s.slot, s.blocks, /*want_logits=*/false);
  SequenceSlice& slice = batch.seqs.back();
  for (int i = replay; i < slice.num_rows; ++i) batch.logit_rows.push_back(slice.first_row + i);
  slice.decode = true;  // token by token: each row is what a decode row there computes
  slice.record_states = !recompute;
  slice.record_before_row = recompute ? replay : -1;  // the state before its own rows
  slice.resume_record = recompute ? (replay > 0 ? 0 : -1) : s.rewind_row;
  s.rewind_row = -1;
  counters_.replayed_rows += uint64_t(replay);
  return slice.num_rows - replay;
}

int Speculator::accept(Sequence& s, int rows, int first_logit, const StepResult& result) {
  const int64_t vocab = config_.vocab_size;
  const int start = s.computed - rows;
  const int k = rows - 1;
  SPARKGLM_ASSERT(int(s.drafts.size()) == k && s.drafts_from_chain < 0,
                  "Speculator: drafts changed under a verify slice");
  int accepted = 0, committed = 0;
  for (int i = 0; i < k; ++i) ++counters_.drafted[size_t(i)];
  for (int i = 0; i <= k; ++i) {
    const int32_t draft = i < k ? s.drafts[size_t(i)] : -1;
    const DraftCheck c = check_draft(*s.sampler, result.logits.data() + (first_logit + i) * vocab,
                                     vocab, config_.eos_token_ids, draft, grammar_mask(s, i));
    emit_(s, c.token);
    ++committed;
    if (s.finish != FinishReason::kNone || !c.accepted) break;
    ++counters_.accepted[size_t(i)];
    ++accepted;
  }
  if (k > 0) {
    ++counters_.verify_steps;
    counters_.verify_tokens += uint64_t(committed);
  }
  s.drafts.clear();
  s.draft_masks_made = 0;
  if (s.finish != FinishReason::kNone) return -1;  // its blocks and slot are released
  s.computed = start + accepted + 1;
  s.rewind_row = accepted < k ? accepted : -1;
  trim_blocks(s);
  return accepted;
}

bool Speculator::step_rows_match(const Sequence& s, int first_logit, int accepted,
                                 const StepResult& result) const {
  // The step's MTP rows are the drafter's when each took the token committed after its row.
  if (result.draft_tokens.empty()) return false;
  const int start = s.computed - accepted - 1;
  for (int i = 0; i <= accepted; ++i)
    if (result.draft_tokens[size_t(first_logit + i)] != s.tokens[size_t(start + i + 1)])
      return false;
  return true;
}

void Speculator::commit(Sequence& s, SpecRole role, int rows, int first_logit,
                        const StepResult& result) {
  const int64_t vocab = config_.vocab_size;
  const int start = s.computed - rows;
  int observed = rows;
  const float *step_logits = nullptr, *step_hidden = nullptr;
  const int32_t* chain = nullptr;
  int width = 0;
  if (role == SpecRole::kVerify) {
    const int accepted = accept(s, rows, first_logit, result);
    if (accepted < 0) return;
    observed = accepted + 1;
    bool same = !result.draft_logits.empty() && step_rows_match(s, first_logit, accepted, result);
    // A chain the step ran from another row than the one accepted here (the device's greedy
    // check and the sampler disagreed) rewrote the module's cache after that row: the drafter
    // then runs the rows itself, which writes them again.
    if (!result.draft_chain.empty())
      width = int(result.draft_chain.size() / result.draft_tokens.size());  // per logit row
    if (same && width > 0) {
      chain = result.draft_chain.data() + int64_t(first_logit + accepted) * width;
      if (chain[0] < 0) {
        same = false;
        chain = nullptr;
      }
    }
    if (same) {
      step_logits = result.draft_logits.data() + int64_t(first_logit + accepted) * vocab;
      step_hidden =
          result.draft_hidden.data() + int64_t(first_logit + accepted) * config_.hidden_size;
      ++counters_.step_drafts;
      counters_.step_chains += chain != nullptr;
    }
  } else if (role == SpecRole::kSampleLast &&
             !sample_prompt_end(s, result.logits.data() + (first_logit + rows - 1) * vocab)) {
    return;
  }
  SPARKGLM_ASSERT(result.hidden.size() >= size_t(first_logit + rows) * size_t(config_.hidden_size),
                  "Speculator: the runner returned no hidden states (StepResult::hidden)");
  observed_.push_back({&s, start, observed,
                       result.hidden.data() + int64_t(first_logit) * config_.hidden_size,
                       step_logits, step_hidden, chain, chain ? width : 0});
}

bool Speculator::sample_prompt_end(Sequence& s, const float* logits) {
  emit_(s, check_draft(*s.sampler, logits, config_.vocab_size, config_.eos_token_ids, -1,
                       grammar_mask(s))
               .token);
  return s.finish == FinishReason::kNone;
}

void Speculator::commit_prompt(Sequence& s, SpecRole role, int first_logit,
                               const StepResult& result) {
  if (first_logit < 0) return;  // mid-prompt: the step wrote the module's cache, nothing to draft
  const int64_t vocab = config_.vocab_size, d = config_.hidden_size;
  if (role == SpecRole::kSampleLast &&
      !sample_prompt_end(s, result.logits.data() + int64_t(first_logit) * vocab))
    return;
  SPARKGLM_ASSERT(result.hidden.size() >= size_t(first_logit + 1) * size_t(d),
                  "Speculator: the runner returned no hidden states (StepResult::hidden)");
  const int position = s.computed - 1;  // the slice's last row
  Observed o{&s, position, 1, result.hidden.data() + int64_t(first_logit) * d};
  if (size_t(first_logit) < result.draft_tokens.size() &&
      result.draft_tokens[size_t(first_logit)] == s.tokens[size_t(position + 1)]) {
    o.step_logits = result.draft_logits.data() + int64_t(first_logit) * vocab;
    o.step_hidden = result.draft_hidden.data() + int64_t(first_logit) * d;
    ++counters_.prompt_drafts;
  }
  observed_.push_back(o);
}

bool Speculator::commit_main(Sequence& s, int rows, int first_logit, const StepResult& main,
                             int reserve) {
  const int start = s.computed - rows;
  const int accepted = accept(s, rows, first_logit, main);
  if (accepted < 0) return true;  // finished: nothing to draft
  const int width = main.draft_chain_width;
  if (width > 0 && chain_passes(s) > 0 && step_rows_match(s, first_logit, accepted, main)) {
    // The chain the device runs now from the accepted row is the drafter's own (as in
    // commit()); the next verify slice takes it where it is (StepSampling::chain_from).
    const int want = std::min(take_draft_blocks(s, reserve), width);
    s.drafts.assign(size_t(want), 0);
    s.drafts_from_chain = want > 0 ? (first_logit + accepted) * width : -1;
    trim_blocks(s);  // blocks taken for drafts past the chain
    if (want > 0) pending_.push_back(&s);
    ++counters_.step_drafts;
    ++counters_.step_chains;
    return true;
  }
  // The drafter drafts for it once the step is collected, running the rows itself.
  observed_.push_back(
      {&s, start, accepted + 1, main.hidden.data() + int64_t(first_logit) * config_.hidden_size});
  return false;
}

void Speculator::take_chains(const StepResult& result) {
  for (Sequence* s : pending_) {
    if (s->finish != FinishReason::kNone) continue;
    const size_t from = size_t(s->drafts_from_chain);
    SPARKGLM_ASSERT(
        s->drafts_from_chain >= 0 && from + s->drafts.size() <= result.draft_chain.size(),
        "Speculator: a pipelined verify step returned no chain for its drafts");
    // The tokens its draft rows took on the device (a missing pick, -1, fed token 0).
    for (size_t i = 0; i < s->drafts.size(); ++i)
      s->drafts[i] = std::max(result.draft_chain[from + i], 0);
    s->drafts_from_chain = -1;
  }
  pending_.clear();
}

int Speculator::drafts_wanted(const Sequence& s) const {
  const int64_t left = std::min<int64_t>(
      int64_t(s.request.sampling.max_tokens) - s.generated(),  // tokens it may still commit
      int64_t(max_seq_len_) - int64_t(s.tokens.size()));
  return int(std::clamp<int64_t>(left - 1, 0, tokens_));  // the verify's last row adds one
}

void Speculator::trim_blocks(Sequence& s) {
  // The next step's rows reach position tokens.size() - 1 + drafts.size(), and its chained
  // passes (StepSampling::draft_chain) chain_passes(s) positions past its last row at most.
  const size_t need =
      (s.tokens.size() + s.drafts.size() + size_t(chain_passes(s)) + size_t(block_size_) - 1) /
      size_t(block_size_);
  for (; s.spec_blocks > 0 && s.blocks.size() > need; --s.spec_blocks) {
    blocks_.release(s.blocks.back());
    s.blocks.pop_back();
  }
}

int Speculator::take_draft_blocks(Sequence& s, int reserve) {
  // Blocks for the verify rows: positions up to tokens.size() - 1 + want; then, where free
  // blocks allow, for the step's chained passes past them (trim_blocks keeps those).
  auto take_blocks_for = [&](size_t positions) {
    const size_t need = (positions + size_t(block_size_) - 1) / size_t(block_size_);
    while (s.blocks.size() < need && blocks_.num_free() > reserve) {
      s.blocks.push_back(blocks_.allocate(1)[0]);
      ++s.spec_blocks;
    }
  };
  int want = drafts_wanted(s);
  take_blocks_for(s.tokens.size() + size_t(want));
  const int64_t covered = int64_t(s.blocks.size()) * block_size_ - int64_t(s.tokens.size());
  want = int(std::clamp<int64_t>(covered, 0, want));
  take_blocks_for(s.tokens.size() + size_t(want) + size_t(chain_passes(s)));
  return want;
}

void Speculator::draft(int reserve) {
  std::vector<DraftJob> jobs;
  std::vector<Sequence*> owners;
  const int64_t d = config_.hidden_size;
  for (const Observed& o : observed_) {
    Sequence& s = *o.seq;
    if (s.finish != FinishReason::kNone) continue;
    DraftJob job;
    job.tokens = &s.tokens;
    job.first_position = o.first_position;
    job.rows = o.rows;
    job.hidden = o.hidden;
    job.step_logits = o.step_logits;
    job.step_hidden = o.step_hidden;
    job.step_chain = o.step_chain;
    job.step_chain_tokens = o.step_chain_tokens;
    // Rows in a block another sequence holds (a prefix-cache hit) are that block's, not ours.
    while (job.rows > 0 &&
           blocks_.ref_count(s.blocks[size_t(job.first_position / block_size_)]) > 1) {
      ++job.first_position;
      --job.rows;
      job.hidden += d;
    }
    if (size_t(o.first_position + o.rows) + 1 == s.tokens.size())
      job.want = take_draft_blocks(s, reserve);
    job.state_slot = s.slot;
    job.block_table = &s.blocks;
    job.grammar = s.matcher ? &*s.matcher : nullptr;
    job.masks = s.matcher ? &s.draft_masks : nullptr;
    jobs.push_back(std::move(job));
    owners.push_back(&s);
  }
  observed_.clear();
  if (jobs.empty()) return;
  try {
    drafter_->draft(jobs);
  } catch (const std::exception& e) {
    // A draft only saves time: the sequences go on without one. A device fault is the engine's.
    if (is_device_fatal(e)) throw;
    ++counters_.draft_failures;
    for (DraftJob& job : jobs) {
      job.drafts.clear();
      job.masks_made = 0;
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    owners[i]->drafts = std::move(jobs[i].drafts);
    owners[i]->draft_masks_made = jobs[i].masks_made;
    trim_blocks(*owners[i]);  // blocks taken for drafts the drafter did not make
  }
}

}  // namespace sparkglm
