#pragma once
// The MTP module (MODEL.md section 6) as a drafter. For a job it first runs the module over the
// rows the main model just computed: row i takes the committed next token t_{i+1} and h_i, which
// writes the MTP layer's own cache at every committed position (so its attention sees the whole
// sequence, as in training); the last row's logits give draft 1. Drafts 2..k chain: the module
// runs again one position on, on draft j - 1 and its own previous output state. Drafts are the
// argmax of the draft logits (a point-mass proposal, which the verify rule of draft_check.h
// accepts with the target probability of the draft), among the tokens the job's output grammar
// allows at that position when it has one (the matcher advanced through the drafts before it,
// and rolled back after). Every job is one slice of each call, so
// one call serves the whole batch. A job whose rows the verify step already ran through the
// module (DraftJob::step_logits) skips the first call: its draft 1 comes from the step's row. One
// whose verify step also chained the later passes (DraftJob::step_chain) takes the whole chain
// from the step, where its first token is the pick of the step's row here too.
#include "engine/model/model_runner.h"
#include "engine/runtime/speculation/drafter.h"

namespace sparkglm {

class MtpDrafter : public Drafter {
 public:
  // Error(kInvalidArgument) when the model has no MTP module.
  explicit MtpDrafter(ModelRunner& runner);
  void draft(std::vector<DraftJob>& jobs) override;
  bool reads_step_drafts() const override { return true; }
  bool reads_step_chains() const override { return true; }

 private:
  ModelRunner& runner_;
};

}  // namespace sparkglm
