#pragma once
// What a pipelined step asks of a runner beyond the forward (ModelRunner::submit), and what it
// gives back (ModelRunner::collect). A runner that picks tokens itself (greedy, and on a device
// backend seeded draws too) only returns token ids for those rows, and the next step can read them
// where they are: the scheduler then builds and submits step N+1 before it has seen step N's
// tokens, so host work overlaps the device, and no logit row crosses to the host.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace sparkglm {

// How a runner draws a row's token itself: runtime/sampler.h's rule (steps 4 and 5) on the raw
// logits, without masks, penalties or logprobs. Temperature 0 is greedy_token().
struct RowDraw {
  float temperature = 0.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  int32_t top_k = 0;
  uint64_t seed = 0;
  uint64_t index = 0;  // the draw's index: tokens the sequence generated before this one
};

struct StepSampling {
  // [logit_rows]: 1 where the runner picks the token itself, by draws[row]; the logits of such
  // rows need not be returned. Empty: no row is picked by the runner. A runner that does not
  // ModelRunner::draws_sampled() is only asked for greedy rows.
  std::vector<uint8_t> picked;
  std::vector<RowDraw> draws;  // [logit_rows] where picked is not empty
  // [rows]: -1, or a logit row of the previous submitted step, whose picked token is this row's
  // input (the batch's token there is a placeholder). Empty: every row's token is in the batch.
  // A pick that found no token (-1) feeds token 0: that sequence has failed and its row is waste.
  std::vector<int32_t> token_from;
  // [rows]: -1, or an entry of the previous submitted step's StepResult::draft_chain (logit row
  // x width + draft), whose token is this row's input, as token_from's (-1 feeds token 0): the
  // draft rows of a verify slice built before the step that drafted them was collected
  // (ModelRunner::collect_main). Empty: none.
  std::vector<int32_t> chain_from;
  // Grammar masks of picked rows (text/grammar): [logit_rows] the row's mask index, or -1; empty:
  // no row is masked. fill_masks writes the masks, [mask rows, mask_words] uint32 (bit id % 32 of
  // word id / 32 set: allowed). A runner calls it after it has launched the forward and before it
  // picks, so the host computes the masks while the device runs the step.
  std::vector<int32_t> mask_row;
  int32_t mask_words = 0;
  std::function<void(uint32_t* masks)> fill_masks;
  // Drafts inside the step (speculative decoding, docs/speculative-decoding.md): also run the MTP
  // module (ModelRunner::forward_mtp's arithmetic) on every logit row, row i taking the main
  // model's greedy pick at i as its next token and the row's hidden state, and return what it
  // computed (StepResult::draft_*). The scheduler asks it only for steps whose rows are all logit
  // rows, in batch order, none picked by the runner; a runner that cannot (no MTP module, a shape
  // it does not serve) returns no draft rows, and the drafter then runs the module itself.
  bool draft_on_picks = false;
  // With draft_on_picks, on a step whose every member is a verify slice of a plain greedy
  // sequence without a grammar: also pick each slice's accepted row on the device (its drafts
  // checked against the main model's greedy picks, draft_check.h's rule for such a sequence)
  // and chain this many more MTP passes from it, one row per slice, the passes the drafter
  // would run after the step (mtp_drafter.cpp), so the step returns whole chains of drafts
  // (StepResult::draft_chain) with one wait (the CUDA runner inside its step's graph; the
  // default pipeline with forward_mtp calls, ModelRunner::draft_chain). 0: none. A runner that
  // cannot returns none.
  int32_t draft_chain = 0;
  // Drafts over prompt rows (speculative decoding): [rows], or empty (none). Also run the MTP
  // module over every row of the step inside it, as ModelRunner::forward_mtp would over the
  // same slices, row i taking mtp_next[i] as its next token, or the runner's pick at row i where
  // mtp_next[i] < 0 (only at logit rows; the greedy pick where the runner does not pick the row
  // itself, as for a speculative member); return what it computed at the logit rows
  // (StepResult::draft_*). So a prompt's rows write the module's cache with no hidden state
  // leaving the device and no forward of the drafter's own, and only the rows that sample bring
  // logits back. The scheduler asks it only of a runner that drafts_over_prompts(), for steps of
  // prefill slices alone; never with draft_on_picks.
  std::vector<int32_t> mtp_next;

  int32_t mask_rows() const {
    int32_t n = 0;
    for (int32_t m : mask_row) n = m >= n ? m + 1 : n;
    return n;
  }
  bool picks(int logit_row) const {
    return logit_row < int(picked.size()) && picked[size_t(logit_row)] != 0;
  }
};

struct StepResult {
  std::vector<int32_t> tokens;  // [logit_rows]: the runner's picks; -1 where none (or not picked)
  std::vector<float> logits;    // [logit_rows, vocab]; rows the runner picked may hold anything
  // [logit_rows, D]: ForwardOutput::hidden, what a drafter (the MTP module) reads. Empty from a
  // runner that does not return it (speculation then needs ModelRunner's default collect).
  std::vector<float> hidden;
  // StepSampling::draft_on_picks or mtp_next, when the runner ran it (else all three empty): per
  // logit row, the token the MTP module took as its next token (the greedy pick, or mtp_next's;
  // -1: none), and the module's logits ([logit_rows, vocab]) and output state ([logit_rows, D])
  // there.
  std::vector<int32_t> draft_tokens;
  std::vector<float> draft_logits;
  std::vector<float> draft_hidden;
  // StepSampling::draft_chain, when the runner ran it (else empty): [logit_rows, draft_chain + 1]
  // tokens. The row a slice's drafts were accepted to on the device holds the drafts chained
  // from it: its draft_logits' greedy pick, then one per pass (-1 after a pass found none);
  // every other row holds -1. The chain's passes wrote the MTP layer's cache at the positions
  // after that row, as the drafter's own passes would.
  std::vector<int32_t> draft_chain;
  // ModelRunner::collect_main: the width draft_chain will have when the step is collected (0:
  // the step runs no chain).
  int32_t draft_chain_width = 0;

  // Moves `from`'s main rows here (tokens, logits, hidden, draft_tokens): what
  // ModelRunner::collect_main hands over before the rest of the step.
  void take_main_rows(StepResult& from);
};

// The greedy rule of runtime/sampler.h without masks or penalties: the lowest id among the
// maxima, NaN counted as -inf; -1 when every logit is NaN or -inf.
int32_t greedy_token(const float* logits, int64_t vocab);
// The same among the tokens of `allowed` ([ceil(vocab / 32)] words, as apply_token_mask's): what
// greedy_token returns after apply_token_mask, without writing the logits.
int32_t greedy_token(const float* logits, int64_t vocab, const uint32_t* allowed);

// Sets the logits of tokens outside `allowed` ([vocab] logits, [ceil(vocab / 32)] words) to -inf.
void apply_token_mask(const uint32_t* allowed, float* logits, int64_t vocab);

}  // namespace sparkglm
