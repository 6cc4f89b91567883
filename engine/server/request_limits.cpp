#include "engine/server/request_limits.h"

#include <string>

#include "engine/options/effective_config.h"
#include "engine/server/api_error.h"

namespace sparkglm::server {

namespace {

ApiError beyond(const std::string& field, size_t given, size_t limit, const char* unit,
                const char* option) {
  return ApiError(400, "invalid_request_error", "request_too_large",
                  "`" + field + "` has " + std::to_string(given) + " " + unit +
                      "; this server's limit is " + std::to_string(limit) + " (" + option + ")",
                  field);
}

}  // namespace

RequestLimits request_limits_from(const EffectiveConfig& config) {
  RequestLimits l;
  l.max_messages = size_t(config.integer("max-messages"));
  l.max_tools = size_t(config.integer("max-tools"));
  l.max_prompt_bytes = size_t(config.integer("max-prompt-bytes"));
  return l;
}

void check_message_counts(const nlohmann::json& body, const RequestLimits& limits) {
  const auto messages = body.find("messages");
  if (messages != body.end() && messages->is_array() && messages->size() > limits.max_messages)
    throw beyond("messages", messages->size(), limits.max_messages, "messages", "--max-messages");
  const auto tools = body.find("tools");
  if (tools != body.end() && tools->is_array() && tools->size() > limits.max_tools)
    throw beyond("tools", tools->size(), limits.max_tools, "tools", "--max-tools");
}

void check_prompt_bytes(size_t bytes, const RequestLimits& limits, const char* field) {
  if (bytes > limits.max_prompt_bytes)
    throw beyond(field, bytes, limits.max_prompt_bytes, "bytes", "--max-prompt-bytes");
}

}  // namespace sparkglm::server
