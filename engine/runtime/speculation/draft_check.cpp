#include "engine/runtime/speculation/draft_check.h"

#include "engine/core/error.h"

namespace sparkglm {

namespace {
// Keeps the verify rule's uniforms apart from sample()'s draws of the same seed.
constexpr uint64_t kVerifyStream = 0x7a3d1c5b9e2f4861ull;
}  // namespace

int32_t resolve_draft(const std::vector<float>& w, int32_t draft, double u_accept,
                      double u_residual, bool& accepted) {
  SPARKGLM_ASSERT(draft >= 0 && size_t(draft) < w.size(), "resolve_draft: draft outside w");
  double total = 0.0;
  for (float x : w) total += double(x);
  const double p_draft = double(w[size_t(draft)]);
  accepted = u_accept * total < p_draft;
  const double rest = total - p_draft;
  if (accepted || !(rest > 0.0)) {
    accepted = true;  // rest 0: the draft holds all the mass, and u_accept < 1 accepted it
    return draft;
  }
  const double target = u_residual * rest;
  double cumulative = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (int32_t(i) == draft || !(w[i] > 0.0f)) continue;
    last = int32_t(i);
    cumulative += double(w[i]);
    if (cumulative > target) return last;
  }
  return last;  // rounding ended the walk a little short: the last kept token
}

DraftCheck check_draft(const SequenceSampler& sampler, const float* logits, int64_t vocab,
                       const std::vector<int>& eos_ids, int32_t draft, const uint32_t* allowed) {
  DraftCheck c;
  if (draft < 0 || sampler.params().greedy()) {
    c.token = sampler.sample(logits, vocab, eos_ids, allowed);
    c.accepted = draft >= 0 && c.token.token == draft;
    return c;
  }
  SPARKGLM_ASSERT(!sampler.params().logprobs, "check_draft: a sampled row with logprobs");
  thread_local std::vector<float> w;
  sampler.target_weights(logits, vocab, eos_ids, w, allowed);
  const uint64_t index = uint64_t(sampler.generated());
  const uint64_t stream = sampler.seed() ^ kVerifyStream;
  c.token.token = resolve_draft(w, draft, sampling_uniform(stream, 2 * index),
                                sampling_uniform(stream, 2 * index + 1), c.accepted);
  return c;
}

}  // namespace sparkglm
