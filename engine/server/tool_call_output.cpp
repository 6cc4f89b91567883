#include "engine/server/tool_call_output.h"

#include <utility>

#include "engine/server/openai_response.h"

namespace sparkglm::server {

using nlohmann::json;

ToolCallOutput::ToolCallOutput(std::vector<json> tools, bool parallel_tool_calls)
    : parser_(std::move(tools)), parallel_(parallel_tool_calls) {}

std::string ToolCallOutput::feed(std::string_view content, json& calls) {
  return take(parser_.feed(content), calls);
}

std::string ToolCallOutput::flush(json& calls) {
  return take(parser_.flush(), calls);
}

std::string ToolCallOutput::take(ToolParseDelta d, json& calls) {
  for (ParsedToolCall& call : d.calls) {
    if (!parallel_ && returned_ >= 1) break;
    std::string id = new_request_id("call");
    id[4] = '_';  // OpenAI spells them call_...
    calls.push_back(
        {{"index", returned_},
         {"id", std::move(id)},
         {"type", "function"},
         {"function",
          {{"name", std::move(call.name)},
           {"arguments", call.arguments.dump(-1, ' ', false, json::error_handler_t::replace)}}}});
    ++returned_;
  }
  return std::move(d.content);
}

}  // namespace sparkglm::server
