#pragma once
// The tool calls of one chat choice: its content text goes through the ToolCallParser
// (engine/text/tool_parser.h) and each call it completes comes out as OpenAI's tool_call object,
//   {"index": i, "id": "call_...", "type": "function",
//    "function": {"name": ..., "arguments": "<the arguments as a JSON string>"}}
// as a stream's delta carries it (a message's tool_calls drop "index"). A call goes out whole,
// once its </tool_call> is generated, since its arguments are typed only then. With
// parallel_tool_calls false, only the first call is returned.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/text/tool_parser.h"

namespace sparkglm::server {

class ToolCallOutput {
 public:
  ToolCallOutput(std::vector<nlohmann::json> tools, bool parallel_tool_calls);

  // Content in; the content to show now out, and the calls completed appended to `calls`.
  std::string feed(std::string_view content, nlohmann::json& calls);
  // The end of generation.
  std::string flush(nlohmann::json& calls);
  size_t calls() const { return returned_; }

 private:
  std::string take(ToolParseDelta d, nlohmann::json& calls);

  ToolCallParser parser_;
  bool parallel_;
  size_t returned_ = 0;
};

}  // namespace sparkglm::server
