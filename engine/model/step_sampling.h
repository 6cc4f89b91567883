#pragma once
// What a pipelined step asks of a runner beyond the forward (ModelRunner::submit), and what it
// gives back (ModelRunner::collect). A runner that picks greedy tokens itself only returns token
// ids for those rows, and the next step can read them where they are: the scheduler then builds
// and submits step N+1 before it has seen step N's tokens, so host work overlaps the device.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sparkglm {

struct StepSampling {
  // [logit_rows]: 1 where the runner picks the token itself with greedy_token(); the logits of
  // such rows need not be returned. Empty: no row is picked by the runner.
  std::vector<uint8_t> greedy;
  // [rows]: -1, or a logit row of the previous submitted step, whose picked token is this row's
  // input (the batch's token there is a placeholder). Empty: every row's token is in the batch.
  // A pick that found no token (-1) feeds token 0: that sequence has failed and its row is waste.
  std::vector<int32_t> token_from;

  bool picks(int logit_row) const {
    return logit_row < int(greedy.size()) && greedy[size_t(logit_row)] != 0;
  }
};

struct StepResult {
  std::vector<int32_t> tokens;  // [logit_rows]: the runner's picks; -1 where none (or not picked)
  std::vector<float> logits;    // [logit_rows, vocab]; rows the runner picked may hold anything
};

// The greedy rule of runtime/sampler.h without masks or penalties: the lowest id among the
// maxima, NaN counted as -inf; -1 when every logit is NaN or -inf.
int32_t greedy_token(const float* logits, int64_t vocab);

}  // namespace sparkglm
