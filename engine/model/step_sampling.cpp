#include "engine/model/step_sampling.h"

#include <cmath>
#include <limits>
#include <utility>

namespace sparkglm {

void StepResult::take_main_rows(StepResult& from) {
  tokens = std::move(from.tokens);
  logits = std::move(from.logits);
  hidden = std::move(from.hidden);
  draft_tokens = std::move(from.draft_tokens);
}

int32_t greedy_token(const float* logits, int64_t vocab) {
  int32_t best = -1;
  float best_value = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i)
    if (logits[i] > best_value) {  // NaN and -inf never win; the first maximum stays
      best_value = logits[i];
      best = int32_t(i);
    }
  return best;
}

int32_t greedy_token(const float* logits, int64_t vocab, const uint32_t* allowed) {
  int32_t best = -1;
  float best_value = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i)
    if ((allowed[i >> 5] >> (i & 31) & 1u) && logits[i] > best_value) {
      best_value = logits[i];
      best = int32_t(i);
    }
  return best;
}

void apply_token_mask(const uint32_t* allowed, float* logits, int64_t vocab) {
  for (int64_t i = 0; i < vocab; ++i)
    if (!(allowed[i >> 5] >> (i & 31) & 1u)) logits[i] = -std::numeric_limits<float>::infinity();
}

}  // namespace sparkglm
