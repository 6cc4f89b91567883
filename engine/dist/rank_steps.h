#pragma once
// The pipelined steps (ModelRunner::submit / collect) of a runner whose LM head is split by
// vocabulary across ranks (vocab_parallel.h). Every rank holds one and makes the same calls in
// the same order (rank 0 from the scheduler, the others from rank_follower.h):
//
//   collect: the step's input tokens come from the previous step's picks (token_from), which are
//            the same on every rank; the forward leaves each rank its vocabulary part of the
//            logits; a picked row without a grammar mask is picked across ranks (greedy_picks:
//            one (max, id) pair per rank); every other row (masked, or returned to the sampler)
//            is gathered whole; rank 0, the only rank that has the masks, masks and picks those,
//            and broadcasts the step's tokens so that every rank feeds the same next step.
// Rows are greedy here, as in the default ModelRunner::collect: the sampler on rank 0 draws
// sampled rows from the gathered logits. The final hidden states (what an MTP drafter reads) are
// returned whole: every rank holds them after the last all-reduce.
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "engine/dist/communicator.h"
#include "engine/model/forward_batch.h"
#include "engine/model/step_sampling.h"

namespace sparkglm::dist {

class RankSteps {
 public:
  // Runs the forward over a batch, leaving this rank's [logit_rows, vocab / W] logits in out.
  using ForwardShard = std::function<void(const ForwardBatch&, ForwardOutput&)>;
  RankSteps(Communicator& comm, int64_t vocab, ForwardShard forward_shard);

  void submit(const ForwardBatch& batch, const StepSampling& sampling);
  // Throws what the forward or a collective throws (Error(kDeviceFatal) for a lost rank).
  void collect(StepResult& result);

 private:
  Communicator& comm_;
  int64_t vocab_;
  ForwardShard forward_shard_;
  std::deque<std::pair<ForwardBatch, StepSampling>> queued_;
  std::vector<int32_t> last_tokens_;  // the previous step's picks, the same on every rank
};

}  // namespace sparkglm::dist
