#pragma once
// What proposes draft tokens for speculative decoding (speculator.h). The scheduler tells a
// drafter, after each step, which positions of a sequence the main model has just computed and
// their hidden states, and asks it for up to `want` tokens continuing the sequence's committed
// tokens; the next step verifies them. A draft only costs or saves time: the verify rule
// (draft_check.h) decides every committed token from the main model alone.
//
// The MTP module (mtp_drafter.h) is the first drafter; another (an n-gram table, a separate draft
// model) implements the same call. A drafter may keep per-sequence caches keyed by state slot
// and block table: those are the scheduler's, and every position a job names is covered by them.
#include <cstdint>
#include <vector>

#include "engine/text/grammar/grammar_matcher.h"

namespace sparkglm {

struct DraftJob {
  const std::vector<int32_t>* tokens = nullptr;  // the sequence's committed tokens
  // The main model has just computed positions [first_position, first_position + rows), each of
  // whose next token is in `tokens`; hidden holds its state there ([rows, D], ForwardOutput's).
  int32_t first_position = 0;
  int32_t rows = 0;
  const float* hidden = nullptr;
  int32_t state_slot = 0;
  const std::vector<int32_t>* block_table = nullptr;  // covers the positions drafts are made at
  // Drafts wanted (0: only observe the rows). When > 0 the rows end just before the sequence's
  // last token (first_position + rows == tokens->size() - 1), and the drafts continue it.
  int32_t want = 0;
  // The MTP module already ran over the rows inside the verify step (StepSampling::draft_on_picks,
  // each row on the token that was then committed): its logits ([vocab]) and output state ([D])
  // at the last row. Null: it did not (the drafter runs the rows itself).
  const float* step_logits = nullptr;
  const float* step_hidden = nullptr;
  // The verify step also chained the module's later passes from that row
  // (StepSampling::draft_chain): step_chain_tokens drafts, the first step_logits' greedy pick
  // (-1 ends them). Null: it did not. Only with step_logits, and never with a grammar.
  const int32_t* step_chain = nullptr;
  int32_t step_chain_tokens = 0;
  // The sequence's output grammar at its committed tokens, or null. A drafter may use it to
  // draft only tokens the grammar allows (accept_token through its drafts), and must leave it
  // as it found it (rollback), also when it throws. A refused draft costs only its row.
  GrammarMatcher* grammar = nullptr;
  // With a grammar, room where a drafter may leave the mask it drafted each token under
  // ((*masks)[i] before drafts[i]), saying in masks_made how many leading drafts have theirs: the
  // verify row of draft i needs exactly that mask, which is then not filled twice.
  std::vector<std::vector<uint32_t>>* masks = nullptr;
  int32_t masks_made = 0;       // out
  std::vector<int32_t> drafts;  // out: at most `want` tokens
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Fills each job's drafts. Called on the engine thread with no step queued in the runner.
  virtual void draft(std::vector<DraftJob>& jobs) = 0;
  // Whether it reads DraftJob::step_logits (then the scheduler asks verify steps for them).
  virtual bool reads_step_drafts() const { return false; }
  // Whether it reads DraftJob::step_chain (then verify steps are asked for whole chains).
  virtual bool reads_step_chains() const { return false; }
};

}  // namespace sparkglm
