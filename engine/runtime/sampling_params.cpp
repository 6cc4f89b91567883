#include "engine/runtime/sampling_params.h"

#include <cmath>
#include <sstream>
#include <string>

#include "engine/core/error.h"

namespace sparkglm {

namespace {

template <typename T>
std::string text(T v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

[[noreturn]] void bad(const std::string& field, const std::string& allowed,
                      const std::string& got) {
  throw Error(ErrorKind::kInvalidArgument,
              "sampling parameter `" + field + "` must be " + allowed + ", got " + got);
}

// Written as !(inside) so that NaN, which compares false with everything, is rejected too.
void require_in(const char* field, float v, float lo, float hi, const char* allowed) {
  if (!(v >= lo && v <= hi)) bad(field, allowed, text(v));
}

}  // namespace

void SamplingParams::validate(int64_t vocab_size) const {
  require_in("temperature", temperature, 0.0f, 2.0f, "in [0, 2]");
  if (!(top_p > 0.0f && top_p <= 1.0f)) bad("top_p", "in (0, 1]", text(top_p));
  if (top_k < -1) bad("top_k", "-1 or 0 (off) or a positive count", text(top_k));
  require_in("min_p", min_p, 0.0f, 1.0f, "in [0, 1]");
  require_in("presence_penalty", presence_penalty, -2.0f, 2.0f, "in [-2, 2]");
  require_in("frequency_penalty", frequency_penalty, -2.0f, 2.0f, "in [-2, 2]");
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    bad("repetition_penalty", "a finite number > 0 (1 is off)", text(repetition_penalty));
  if (max_tokens < 1) bad("max_tokens", ">= 1", text(max_tokens));
  if (min_tokens < 0 || min_tokens > max_tokens)
    bad("min_tokens", "in [0, max_tokens=" + text(max_tokens) + "]", text(min_tokens));
  if (top_logprobs < 0 || top_logprobs > 20) bad("top_logprobs", "in [0, 20]", text(top_logprobs));
  if (top_logprobs > 0 && !logprobs)
    bad("top_logprobs", "0 unless logprobs is true", text(top_logprobs));
  for (int32_t id : stop_token_ids) {
    if (id < 0) bad("stop_token_ids", "token ids >= 0", text(id));
    if (vocab_size > 0 && id >= vocab_size)
      bad("stop_token_ids", "token ids in [0, vocab_size=" + text(vocab_size) + ")", text(id));
  }
}

}  // namespace sparkglm
