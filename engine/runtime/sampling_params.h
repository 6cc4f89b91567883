#pragma once
// How one request chooses its tokens: the OpenAI / vLLM sampling fields with their defaults and the
// ranges a request may ask for. Stop strings are matched by the text layer, not here.
#include <cstdint>
#include <optional>
#include <vector>

namespace sparkglm {

struct SamplingParams {
  float temperature = 1.0f;  // [0, 2]; 0 means greedy (argmax, lowest id among equal maxima)
  float top_p = 1.0f;        // (0, 1]; 1 keeps every token
  int32_t top_k = 0;         // 0 or -1 keeps every token; k > 0 keeps the k most probable
  float min_p = 0.0f;        // [0, 1]; drops tokens below min_p * (probability of the top token)
  // Reproducible draws: the i-th generated token depends only on (seed, i) and its logits. Without
  // a seed the scheduler's per-request fallback seed is used.
  std::optional<uint64_t> seed;
  float presence_penalty = 0.0f;    // [-2, 2]; subtracted once from every token already generated
  float frequency_penalty = 0.0f;   // [-2, 2]; subtracted once per time a token was generated
  float repetition_penalty = 1.0f;  // > 0; 1 is off; applies to prompt and generated tokens
  int32_t max_tokens = 16;          // >= 1; vLLM's default, the server sets it from the request
  int32_t min_tokens = 0;           // [0, max_tokens]; stop tokens are masked until reached
  bool ignore_eos = false;          // eos does not end the sequence (it can still be sampled)
  std::vector<int32_t> stop_token_ids;  // each ends the sequence, even with ignore_eos
  bool logprobs = false;                // return the chosen token's log-probability
  int32_t top_logprobs = 0;             // [0, 20]; the n most likely too; needs logprobs

  bool greedy() const { return temperature == 0.0f; }
  bool top_k_enabled() const { return top_k > 0; }

  // Throws Error(kInvalidArgument) naming the first field out of range and the range allowed.
  // With vocab_size > 0, stop_token_ids must also lie in [0, vocab_size).
  void validate(int64_t vocab_size = 0) const;
};

}  // namespace sparkglm
