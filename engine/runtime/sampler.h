#pragma once
// Chooses the next token of one sequence from its logits, with the request's SamplingParams and the
// penalty state of what the sequence has seen so far. The scheduler keeps one per running request.
//
// sample() works in this order, following vLLM:
//  1. Masks. NaN logits become -inf: they are never sampled. While generated() < min_tokens, the
//     tokens that would end the sequence become -inf: stop_token_ids, and the eos ids unless
//     ignore_eos (then eos ends nothing, so there is nothing to hold back). An output grammar's
//     mask wins over min_tokens: where it allows nothing but tokens that end the sequence (a
//     complete guided_choice or JSON value), they are not held back, and the output ends there.
//  2. Penalties, on the masked logits, in vLLM's order:
//     repetition_penalty r: once per distinct token seen in the prompt or the output, a logit
//       x > 0 becomes x / r and x <= 0 becomes x * r;
//     frequency_penalty f: x -= f * (times the token was generated);
//     presence_penalty p: x -= p if the token was generated at least once.
//     Frequency and presence count generated tokens only, never the prompt.
//     The result is the *processed* logits.
//  3. Log-probabilities (only when params.logprobs): log_softmax of the processed logits (exp
//     summed in double), before temperature, top-k, top-p and min-p; the logprob is that of the
//     chosen token, and top_logprobs are the n largest, sorted descending (ties by lower id),
//     leaving out tokens of probability zero (masked ones).
//  4. Greedy (temperature 0): the lowest id among the maxima of the processed logits; no draw.
//  5. Otherwise, probabilities softmax(processed / temperature) (a token below e^-87 times the
//     top one counts as 0), then
//     top_k: keeps the k most probable (ties by lower id); k <= 0 or k >= vocab keeps all;
//     top_p: keeps the smallest set of most probable tokens (ties by lower id) whose mass,
//       renormalised over the top-k set, reaches top_p;
//     min_p: keeps tokens whose probability is >= min_p * the largest probability;
//     draw: u in [0, 1) from the request's seed, then the inverse CDF over the kept tokens
//       walked in increasing id order. One order on every path means a truncation that keeps
//       every token draws exactly the token no truncation draws.
//
// Reproducibility: u for the i-th generated token (i = generated() at the call) is a pure function
// of (seed, i): a SplitMix64 mix of a Weyl sequence keyed by the seed. The request's seed wins;
// without one the fallback seed given at construction is used. So a seeded request produces the
// same tokens whatever else is batched with it, and sample() called twice without accept() returns
// the same token (a recomputed step after preemption draws what it drew before).
//
// ignore_eos only changes whether eos stops the sequence (is_stop()); eos is never masked for it.
//
// sample() changes no state and is safe to call from several threads for different sequences; its
// scratch buffers are per thread.
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/model/step_sampling.h"
#include "engine/runtime/sampling_params.h"

namespace sparkglm {

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;  // log-probability of `token` (step 3); 0 when params.logprobs is false
  std::vector<std::pair<int32_t, float>> top_logprobs;  // (id, logprob), descending
};

class SequenceSampler {
 public:
  // Validates `params` (Error(kInvalidArgument) naming the field). `prompt_tokens` feed the
  // repetition penalty only.
  SequenceSampler(const SamplingParams& params, std::vector<int32_t> prompt_tokens,
                  uint64_t fallback_seed);

  // logits: [vocab] raw logits of this sequence's next position; eos_ids: the model's eos ids;
  // allowed: null, or the grammar's allowed-token bitset [ceil(vocab / 32)] (text/grammar): a
  // mask of step 1, tokens outside it become -inf.
  // Throws Error(kInvalidArgument) when no token can be drawn (every logit NaN, -inf or masked).
  SampledToken sample(const float* logits, int64_t vocab, const std::vector<int>& eos_ids,
                      const uint32_t* allowed = nullptr) const;

  // The distribution sample() draws from, as weights over the vocab (any scale; w[i] / sum w is
  // the probability of i): steps 1, 2, 4 and 5 without the draw. Greedy: 1 at the token sample()
  // picks, 0 elsewhere. Speculative decoding's rejection rule keeps this distribution
  // (runtime/speculation/draft_check.h). `allowed` as for sample(). Throws as sample() does.
  void target_weights(const float* logits, int64_t vocab, const std::vector<int>& eos_ids,
                      std::vector<float>& weights, const uint32_t* allowed = nullptr) const;

  // True when the token at output index `index` is greedy_token() of the raw logits (model/
  // step_sampling.h), so a runner may pick it: temperature 0, no penalties, no logprobs, and
  // min_tokens reached (no masks).
  bool plain_greedy_at(int index) const;
  // True when that token is greedy_token() of the raw logits, whether or not its logprobs are
  // wanted: what a device may check drafts against (StepSampling::draft_chain).
  bool raw_greedy_at(int index) const;
  // True when the token at output index `index` needs nothing but the raw logits and the draw of
  // step 5 (or 4): no penalties, no logprobs, min_tokens reached; any temperature. Its RowDraw:
  bool plain_draw_at(int index) const;
  RowDraw row_draw(int index) const;

  // Records a generated token: it advances the draw counter and the penalty counts.
  void accept(int32_t token);
  int generated() const { return generated_; }

  // True when `token`, once generated, ends the sequence: one of stop_token_ids, or an eos id
  // unless ignore_eos. (max_tokens and stop strings are the scheduler's and text layer's checks.)
  bool is_stop(int32_t token, const std::vector<int>& eos_ids) const;

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }

 private:
  // No penalty and no min_tokens mask changes the token at output index `index`: steps 1-3 of
  // sample() leave the raw logits as they are.
  bool raw_logits_at(int index) const;
  void apply_masks_and_penalties(float* x, int64_t vocab, const std::vector<int>& eos_ids,
                                 const uint32_t* allowed) const;
  // Steps 1-3 on a copy of the row in the thread's scratch (NaN as -inf, the masks and
  // penalties), its maximum into max_logit; refuses a row with nothing left to sample.
  const float* masked_logits(const float* logits, int64_t vocab, const std::vector<int>& eos_ids,
                             const uint32_t* allowed, float& max_logit) const;
  // True when every token `allowed` holds would end the sequence (is_stop).
  bool only_stops_allowed(const uint32_t* allowed, int64_t vocab,
                          const std::vector<int>& eos_ids) const;
  // Step 5 up to the draw: the kept weights in the thread's scratch, [vocab].
  float* kept_weights(const float* x, int64_t vocab, float max_logit) const;
  int32_t draw(const float* x, int64_t vocab, float max_logit) const;

  SamplingParams params_;
  uint64_t seed_;
  std::vector<int32_t> prompt_seen_;                    // distinct prompt ids, sorted
  std::unordered_map<int32_t, int32_t> output_counts_;  // generated id -> times generated
  int generated_ = 0;
};

// The uniform double in [0, 1) for the `index`-th draw of `seed`; exposed for tests.
double sampling_uniform(uint64_t seed, uint64_t index);
// e^z for z <= 0 (or -inf) within 2e-7 relative, and 0 below z = -87 (where e^z < 2^-125). The
// sampler's own rather than std::exp: plain IEEE float steps the compiler vectorises (this is
// the main cost of a draw over the vocab) and that give the same bits on every host, so seeded
// sampling reproduces across machines and libm versions.
float exp_nonpositive(float z);

}  // namespace sparkglm
