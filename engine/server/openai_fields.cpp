#include "engine/server/openai_fields.h"

#include <algorithm>
#include <span>
#include <string>
#include <string_view>

#include "engine/server/api_error.h"

namespace sparkglm::server {

namespace {

// Both routes: sampling, stopping, output shape, streaming, the vLLM extensions.
constexpr std::string_view kShared[] = {
    "model",
    "stream",
    "stream_options",
    "n",
    "best_of",
    "echo",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "min_tokens",
    "ignore_eos",
    "stop",
    "stop_token_ids",
    "max_tokens",
    "include_stop_str_in_output",
    "skip_special_tokens",
    "return_token_ids",
    "cache_salt",
    "disable_mtp",  // no speculative decoding for this request
    "logit_bias",
    "logprobs",
    "add_special_tokens",
    "response_format",
    "structured_outputs",
    "guided_json",
    "guided_choice",
    "guided_regex",
    "guided_grammar",
    "guided_decoding_backend",
    "guided_whitespace_pattern",
    "user",  // accepted and unused: an end-user id for the provider's abuse tracking
};

constexpr std::string_view kChatOnly[] = {
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "top_logprobs",
    "reasoning_effort",
    "chat_template_kwargs",
    "add_generation_prompt",
    "max_completion_tokens",
    "functions",
    "function_call",
};

constexpr std::string_view kCompletionOnly[] = {"prompt", "suffix"};

// vLLM's /tokenize and /detokenize fields that this server implements.
constexpr std::string_view kTokenizePrompt[] = {"model", "prompt", "add_special_tokens"};
constexpr std::string_view kTokenizeMessages[] = {
    "model", "messages",         "add_special_tokens",   "add_generation_prompt",
    "tools", "reasoning_effort", "chat_template_kwargs",
};
constexpr std::string_view kDetokenize[] = {"model", "tokens", "skip_special_tokens"};

bool listed(std::span<const std::string_view> table, std::string_view key) {
  return std::find(table.begin(), table.end(), key) != table.end();
}

}  // namespace

void check_known_fields(const nlohmann::json& body, RequestRoute route) {
  const bool chat = route == RequestRoute::kChat;
  auto reads = [route, chat](std::string_view key) {
    switch (route) {
      case RequestRoute::kChat:
      case RequestRoute::kCompletion:
        return listed(kShared, key) ||
               (chat ? listed(kChatOnly, key) : listed(kCompletionOnly, key));
      case RequestRoute::kTokenizePrompt:
        return listed(kTokenizePrompt, key);
      case RequestRoute::kTokenizeMessages:
        return listed(kTokenizeMessages, key);
      case RequestRoute::kDetokenize:
        return listed(kDetokenize, key);
    }
    return false;
  };
  const char* path = chat                                       ? "/v1/chat/completions"
                     : route == RequestRoute::kCompletion       ? "/v1/completions"
                     : route == RequestRoute::kTokenizePrompt   ? "/tokenize with a prompt"
                     : route == RequestRoute::kTokenizeMessages ? "/tokenize with messages"
                                                                : "/detokenize";
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it->is_null() || reads(it.key())) continue;
    throw ApiError::invalid_request("`" + it.key() + "` is not a field this server reads on " +
                                        path +
                                        " (docs/api.md lists the fields it reads and refuses)",
                                    it.key());
  }
  // OpenAI's deprecated function-calling fields: `tools` and `tool_choice` replaced them.
  for (const char* legacy : {"functions", "function_call"})
    if (chat && body.contains(legacy) && !body[legacy].is_null())
      throw ApiError::invalid_request(
          std::string("`") + legacy + "` is not supported: use `tools` and `tool_choice`", legacy);
}

}  // namespace sparkglm::server
