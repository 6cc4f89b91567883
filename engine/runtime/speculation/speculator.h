#pragma once
// Speculative decoding in the scheduler (--speculative-tokens k): each engine step verifies up to
// k drafted tokens per sequence in one forward call, and commits the accepted prefix.
//
// Per step, for every running sequence it applies to (applies_to):
//  - build: its decode slice is a verify slice: its last token, then its drafts d1..dj (j <= k),
//    j + 1 rows computed token by token (each row the bits a one-row decode slice would give:
//    batch invariance), every row's logits and hidden state returned, and the KDA state kept for
//    rollback (speculative_rollback.h: after each row, SequenceSlice::record_states, or before
//    its last token's row, record_before_row). Its prefill chunks return every row's hidden
//    state, for the drafter.
//  - collect (commit): the rows are checked in order by the verify rule (draft_check.h); the
//    first rejected draft ends the slice and its row's token is the correction; after an accepted
//    slice the last row adds one more token. Tokens are emitted one at a time, so stop tokens,
//    max_tokens and max_seq_len end the sequence exactly where they would without speculation.
//  - rollback: `computed` moves back to the last accepted row + 1; the next slice resumes the KDA
//    state and conv history from that row's record (SequenceSlice::resume_record), or, rolling
//    back by recompute, from the state kept before the last verify slice's own rows, and then
//    runs its accepted rows again ahead of its own rows (replayed rows, no logits: their latents
//    and indexer keys are rewritten with the bits they already hold; the state before its own
//    rows is kept again, so replays never pile up); blocks taken for draft positions past the
//    new end are released. Latents and indexer keys of rejected rows
//    stay behind the end of blocks this sequence alone holds (decode blocks are never published
//    to the prefix cache): no attention reads past a sequence's end, and the next rows overwrite
//    them.
//  - draft: the drafter (drafter.h) observes the committed rows and proposes the next drafts.
//    A step of verify slices only asks the runner to run the MTP module inside it, on each row's
//    greedy pick (StepSampling::draft_on_picks): where every pick up to the last accepted row is
//    the token committed there (always, for a greedy sequence), those rows are what the drafter
//    would compute, and the drafter starts from the step's row instead of its own forward. A
//    step of at most kMaxChainedSlices plain greedy slices also asks for the later passes
//    (StepSampling::draft_chain): the runner finds the accepted row by the greedy rule and chains
//    the module from it, so the drafter takes a whole chain with no forward of its own.
//    A drafter writes only positions in blocks no other sequence holds (rows in shared prefix
//    blocks are not observed), and drafts take free blocks only beyond one per running sequence,
//    so speculation never makes the scheduler preempt.
// A step with such members is collected before the next one is built: the next step's rows
// depend on what was accepted. Except a step that chains (the verify step pipelined): where the
// runner returns its main rows early (ModelRunner::collect_main, at an event after the main
// model's head), commit_main() commits its slices from those rows alone while the device runs
// the MTP passes, and the scheduler builds and submits the next step at once; that step's draft
// rows take the chain's tokens on the device (StepSampling::chain_from), and take_chains() fills
// the placeholders in s.drafts when the step is collected, before the next step is committed.
//
// A request with an output grammar is drafted for like any other. Each verify row is checked
// under the grammar's mask at that row: the matcher has accepted every token committed before
// the row (the scheduler's emit advances it), which is the mask the row would have without
// speculation, so a draft the grammar refuses is rejected and the output is unchanged. The
// drafter is handed the matcher to draft allowed tokens only, and rolls it back after drafting
// (drafter.h).
//
// Requests it does not apply to run as without speculation: those with disable_speculation (the
// API's disable_mtp), and sampled requests asking for logprobs (the rejection rule draws no
// logprob).
// Nor do the prefix cache's answers (prefill only): the MTP layer's entries of the blocks they
// publish are left as they were, which only lowers the acceptance of a later hit there.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/forward_batch.h"
#include "engine/model/step_sampling.h"
#include "engine/runtime/block_allocator.h"
#include "engine/runtime/sequence.h"
#include "engine/runtime/speculation/drafter.h"
#include "engine/runtime/speculation/speculative_rollback.h"

namespace sparkglm {

inline constexpr int kMaxSpeculativeTokens = 4;
// Verify steps of at most this many slices ask for whole chains (StepSampling::draft_chain), by
// default (SchedulerLimits::speculative_chain_slices). Measured on an H100 with the chain-trained
// micro (docs/speculative-decoding.md, "Chains in the verify step"): in session 23 steps of
// several slices lost 2-3 % with chains at C4 and C8, so only one-slice steps took them; in
// session 26, after the one-launch pool scores and the KDA verify slices, steps of up to 8 slices
// gained at k = 2 (C4 +3.6 %, C8 +11.6 %) and k = 3 (+2.9 %, +1.5 %), three runs alternated,
// identical output (bundles 2026-12-06-speculation-micro-chain-slices-{1,8}-cuda-h100).
inline constexpr int kMaxChainedSlices = 8;

struct SpeculationCounters {
  uint64_t verify_steps = 0;   // verify slices with at least one draft
  uint64_t verify_tokens = 0;  // tokens those slices committed (accepted drafts + one)
  // Per draft position i (0 = the first draft): drafts proposed there, and those accepted (every
  // draft before it accepted too). accepted[i] / drafted[i] is the acceptance of position i.
  std::array<uint64_t, kMaxSpeculativeTokens> drafted{}, accepted{};
  uint64_t draft_failures = 0;  // drafter calls that threw (those sequences went on undrafted)
  uint64_t replayed_rows = 0;   // rows run again by rollback by recompute (speculative_rollback.h)
  // Verify slices whose next first draft came from the MTP rows of the verify step itself
  // (StepSampling::draft_on_picks), with no forward of the drafter's own for it.
  uint64_t step_drafts = 0;
  // Of those, the slices whose step also returned the next drafts' whole chain from their
  // accepted row (StepSampling::draft_chain): the drafter runs no forward of its own for them.
  uint64_t step_chains = 0;
  // Prompts whose first draft came from the MTP rows of their prefill step
  // (StepSampling::mtp_next), with no forward of the drafter's own over the prompt.
  uint64_t prompt_drafts = 0;
  // Verify rows of constrained sequences checked under the mask their draft was drafted under
  // (DraftJob::masks), instead of filling it again.
  uint64_t reused_masks = 0;
};

// A member's part in speculation, per queued step.
enum class SpecRole : uint8_t {
  kNone,        // not speculative: the scheduler's own path
  kObserve,     // a prefill chunk: every row's hidden state goes to the drafter (with
                // StepSampling::mtp_next: its rows ran the module in the step; see commit)
  kSampleLast,  // a prefill chunk that ends the prompt: its last row also samples
  kVerify,      // a verify slice
};

class Speculator {
 public:
  using Emit = std::function<void(Sequence&, const SampledToken&)>;
  // tokens: k in 1..kMaxSpeculativeTokens. emit: the scheduler's emit_token.
  // draft_in_step: ask verify steps for the drafter's first forward (when the drafter reads it).
  // chain_in_step: ask such steps for the whole chain too (StepSampling::draft_chain), when the
  // drafter reads it; the speculator then keeps blocks for the chain's positions where it can.
  Speculator(int tokens, SpeculativeRollback rollback, std::unique_ptr<Drafter> drafter,
             const ModelConfig& config, BlockAllocator& blocks, int block_size, int max_seq_len,
             Emit emit, bool draft_in_step = true, bool chain_in_step = true);

  int tokens() const { return tokens_; }
  // Whether verify steps should run the MTP module on their picks (StepSampling::draft_on_picks).
  bool drafts_in_step() const { return drafts_in_step_; }
  // The chained passes a verify step of `s` may run after its accepted row
  // (StepSampling::draft_chain): 0 when the sequence cannot take them (not a plain greedy
  // sequence, a grammar, chains off).
  int chain_passes(const Sequence& s) const;
  bool applies_to(const Sequence& s) const;
  // Adds the verify slice of `s` (any replayed rows, its last token, then its drafts) to `batch`;
  // returns its rows past s.computed (those with logits, that the commit checks).
  int add_verify_slice(Sequence& s, ForwardBatch& batch);
  // A collected member: its `rows` rows start at logit row `first_logit` of `result`.
  void commit(Sequence& s, SpecRole role, int rows, int first_logit, const StepResult& result);
  // A collected prefill member of a step that ran the MTP module over its rows
  // (StepSampling::mtp_next): the module's cache is written at every row, so only the last row
  // is left to draft from, where the slice has a logit row there (`first_logit`, else -1: a
  // chunk in the middle of the prompt). A kSampleLast member samples there first. The drafter
  // takes its first draft from the step's row when that row took the token now after it (the
  // greedy pick a sampled request may not have drawn), else runs that one row itself.
  void commit_prompt(Sequence& s, SpecRole role, int first_logit, const StepResult& result);
  // The verify step pipelined (ModelRunner::collect_main): commits verify slice `s` from its
  // step's main rows alone. Where the step chains from the row accepted here (always, for the
  // plain greedy sequences chains are run for), its next drafts are that chain: it takes blocks
  // for them as draft() would (leaving `reserve` free), holds placeholders in s.drafts and the
  // chain's entry in s.drafts_from_chain, and returns true; take_chains() then fills them in.
  // False: the drafter drafts for it in draft(), once the step is collected.
  bool commit_main(Sequence& s, int rows, int first_logit, const StepResult& main, int reserve);
  // The collected step's chains into the drafts commit_main() left placeholders for.
  void take_chains(const StepResult& result);
  void drop_pending() { pending_.clear(); }  // the scheduler cancelled everything
  // After every member of a step is committed: drafts for the sequences still running, leaving
  // `reserve` free blocks to the scheduler. Must run while `result` of the commits lives.
  void draft(int reserve);
  const SpeculationCounters& counters() const { return counters_; }

 private:
  struct Observed {  // a committed run of rows for the drafter
    Sequence* seq;
    int32_t first_position, rows;
    const float* hidden;                 // [rows, D]
    const float* step_logits = nullptr;  // DraftJob::step_logits, step_hidden, step_chain
    const float* step_hidden = nullptr;
    const int32_t* step_chain = nullptr;
    int32_t step_chain_tokens = 0;
  };
  int drafts_wanted(const Sequence& s) const;
  // A kSampleLast member's first token, sampled from its prompt's last row (`logits`) and
  // emitted; false when that finished the sequence.
  bool sample_prompt_end(Sequence& s, const float* logits);
  // The verify rule over a verify slice's rows, emitting each committed token, then the
  // rollback: the drafts accepted, or -1 when the sequence finished.
  int accept(Sequence& s, int rows, int first_logit, const StepResult& result);
  // Whether the step's MTP rows up to the accepted one took the tokens committed there.
  bool step_rows_match(const Sequence& s, int first_logit, int accepted,
                       const StepResult& result) const;
  // Takes blocks for the next drafts and the step's chained passes; returns the drafts wanted.
  int take_draft_blocks(Sequence& s, int reserve);
  // Releases draft-only blocks past what the sequence's next step reaches.
  void trim_blocks(Sequence& s);
  // The output grammar's mask for the sequence's next token, or null without one: the drafter's
  // mask of draft `row` when it left it (the same mask: the matcher has accepted the drafts
  // before it), else filled into mask_.
  const uint32_t* grammar_mask(const Sequence& s, int row = -1);

  int tokens_;
  bool drafts_in_step_ = false;
  bool chains_in_step_ = false;
  SpeculativeRollback rollback_;
  std::unique_ptr<Drafter> drafter_;
  const ModelConfig& config_;
  BlockAllocator& blocks_;
  int block_size_, max_seq_len_;
  Emit emit_;
  std::vector<Observed> observed_;
  std::vector<Sequence*> pending_;  // commit_main()'s, whose drafts are still on the device
  std::vector<uint32_t> mask_;
  SpeculationCounters counters_;
};

}  // namespace sparkglm
