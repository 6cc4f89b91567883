#pragma once
// The verify rule: which token a verify row commits, given the draft at that row. The committed
// tokens follow the target distribution exactly (the distribution SequenceSampler::sample draws
// from, penalties and truncations included), whatever the drafter proposed:
//  - greedy: the row's token is sample()'s, and the draft is accepted when it equals it, so
//    greedy output is the same with and without speculation, byte for byte;
//  - temperature > 0 (a point-mass proposal q = [draft]): the draft is accepted with probability
//    p(draft), else the token is drawn from p with the draft removed, renormalised. Then
//    P(token = draft) = p(draft), and P(token = x) = (1 - p(draft)) p(x) / (1 - p(draft)) = p(x)
//    for any other x: the speculative-sampling rule min(1, p/q) with q one-hot.
// The two uniforms of a row are a pure function of the request's seed and the row's output index,
// on a stream apart from sample()'s, so a seeded request's speculative output is reproducible
// (though not the same realisation as without speculation: the distribution is what is kept).
#include <cstdint>
#include <vector>

#include "engine/runtime/sampler.h"

namespace sparkglm {

struct DraftCheck {
  SampledToken token;     // what the row commits
  bool accepted = false;  // token is the draft
};

// draft < 0: the row has no draft (the last row of a verify slice): sample() itself.
// allowed: null, or the output grammar's mask at this row (sample()'s): the target distribution
// is the masked one, so a draft the grammar refuses is never accepted.
// Sampled rows (temperature > 0) must not ask for logprobs (Speculator::applies_to).
DraftCheck check_draft(const SequenceSampler& sampler, const float* logits, int64_t vocab,
                       const std::vector<int>& eos_ids, int32_t draft,
                       const uint32_t* allowed = nullptr);

// The rule on weights w ([vocab], p = w / sum w): accepted when u_accept * sum w < w[draft];
// otherwise the inverse CDF, in increasing id order, of w without the draft at u_residual.
// Both uniforms in [0, 1).
int32_t resolve_draft(const std::vector<float>& w, int32_t draft, double u_accept,
                      double u_residual, bool& accepted);

}  // namespace sparkglm
