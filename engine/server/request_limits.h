#pragma once
// What one request may ask of the server's CPU before it reaches the engine, checked as early as
// each quantity is known: the number of messages and tools right after the body is read (before
// the template renders them), the prompt's bytes before it is tokenized. A request beyond a limit
// is a 400 naming the field, the limit and the option that sets it; the body itself is bounded by
// --max-body-bytes (413) before it is read.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace sparkglm {
class EffectiveConfig;
}

namespace sparkglm::server {

struct RequestLimits {
  size_t max_messages = 16384;         // --max-messages
  size_t max_tools = 1024;             // --max-tools
  size_t max_prompt_bytes = 8u << 20;  // --max-prompt-bytes: a prompt string or a rendered chat
};

// --max-messages, --max-tools and --max-prompt-bytes.
RequestLimits request_limits_from(const EffectiveConfig& config);

// `messages` and `tools` of a chat or /tokenize body (absent or not arrays: left to the parser).
void check_message_counts(const nlohmann::json& body, const RequestLimits& limits);
// A prompt of `bytes` (a string prompt, or the chat as rendered) given in `field`.
void check_prompt_bytes(size_t bytes, const RequestLimits& limits, const char* field);

}  // namespace sparkglm::server
