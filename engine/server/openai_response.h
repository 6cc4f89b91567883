#pragma once
// The JSON of OpenAI's answers: ids, usage, and the two logprobs shapes (chat's list of entries,
// completions' parallel arrays).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/generation_request.h"
#include "engine/server/token_codec.h"

namespace sparkglm::server {

// "chatcmpl-" + 24 hex digits, unique within the process and unlikely to repeat across runs.
std::string new_request_id(const char* prefix);
int64_t unix_seconds();

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"},
//  "completion_tokens_details": {"reasoning_tokens"}}
// cached_tokens counts prompt tokens served from the prefix cache (--enable-prefix-caching;
// RequestEvent::cached_tokens): 0 without it, or on a miss.
nlohmann::json usage_json(int prompt_tokens, int completion_tokens, int reasoning_tokens,
                          int cached_tokens = 0);

// Chat: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...]}.
nlohmann::json chat_logprob(const TokenCodec& codec, const GeneratedToken& token);

// Completions: {"tokens", "token_logprobs", "top_logprobs": [{text: logprob}], "text_offset"}.
class CompletionLogprobs {
 public:
  // `text_offset`: where the token's text starts in the completion text.
  void add(const TokenCodec& codec, const GeneratedToken& token, size_t text_offset);
  bool empty() const { return tokens_.empty(); }
  nlohmann::json to_json() const;
  void clear();

 private:
  nlohmann::json tokens_ = nlohmann::json::array(), logprobs_ = nlohmann::json::array(),
                 top_ = nlohmann::json::array(), offsets_ = nlohmann::json::array();
};

}  // namespace sparkglm::server
