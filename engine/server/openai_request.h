#pragma once
// The bodies of OpenAI's /v1/chat/completions and /v1/completions and of vLLM's /tokenize and
// /detokenize, read into typed requests. Every problem is an ApiError naming the field: malformed
// JSON, a wrong type, a value out of range, an unknown model, a feature this server does not
// implement, and a field the route does not read (openai_fields.h): none is silently ignored.
// A JSON null is "absent". The output constraint and tool choice are read by openai_constraint.h.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/sampling_params.h"
#include "engine/server/openai_constraint.h"
#include "engine/text/chat_template.h"

namespace sparkglm::server {

// What requests are checked against.
struct ServedModel {
  std::string id;       // "glm-5.3-flash", a preset name or a checkpoint directory's name
  int max_seq_len = 0;  // prompt plus output tokens of one request
  int64_t vocab_size = 0;
};

// `n`: independent sequences per request, each its own choice.
constexpr int kMaxChoices = 16;

// Fields shared by chat and text completions.
struct GenerationFields {
  std::string model;  // as given ("" when absent)
  int n = 1;          // choices, in [1, kMaxChoices]
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage_stats = false;  // stream_options: usage on every chunk
  SamplingParams sampling;              // max_tokens is set from max_tokens below, or by the route
  std::optional<int32_t> max_tokens;    // max_completion_tokens, else max_tokens
  std::vector<std::string> stop;        // stop strings, matched on the output text
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;  // control tokens (eos, role markers) leave no text
  bool return_token_ids = false;    // vLLM: prompt_token_ids and token_ids in the answer
  std::string cache_salt;           // seeds the prefix cache's keys (GenerationRequest)
  bool disable_mtp = false;      // no speculative decoding (GenerationRequest::disable_speculation)
  OutputConstraint constraint;   // response_format, structured_outputs, guided_*, tool_choice
  std::string constraint_field;  // the field `constraint` came from, for errors
};

struct ChatCompletionRequest {
  GenerationFields fields;
  ChatRequestText chat;             // messages, tools and template switches
  bool add_special_tokens = false;  // the template already starts with [gMASK]<sop>
  ToolChoice tool_choice;           // "none" leaves chat.options.tools empty
  bool parallel_tool_calls = true;  // false: only the first call is returned

  // Whether generated content is searched for tool calls.
  bool parses_tool_calls() const {
    return !chat.options.tools.empty() && tool_choice.mode != ToolChoice::Mode::kNone;
  }
};

struct CompletionRequest {
  GenerationFields fields;
  std::optional<std::string> prompt_text;  // a string prompt ...
  std::vector<int32_t> prompt_ids;         // ... or token ids
  bool add_special_tokens = true;          // [gMASK]<sop> before a string prompt
};

struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;    // either a prompt ...
  std::optional<ChatRequestText> chat;  // ... or chat messages
  bool add_special_tokens = true;       // default: true for a prompt, false for messages
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
  bool skip_special_tokens = false;  // leave out control tokens, as generated text does
};

// The body as a JSON object: 400 for malformed JSON, nesting deeper than 64 or a non-object.
nlohmann::json parse_json_body(std::string_view body);

ChatCompletionRequest parse_chat_completion(const nlohmann::json& body, const ServedModel& model);
CompletionRequest parse_completion(const nlohmann::json& body, const ServedModel& model);
TokenizeRequest parse_tokenize(const nlohmann::json& body, const ServedModel& model);
DetokenizeRequest parse_detokenize(const nlohmann::json& body, const ServedModel& model);

// 404 unless `requested` is empty or the served model's id.
void check_model(const std::string& requested, const ServedModel& model);

}  // namespace sparkglm::server
