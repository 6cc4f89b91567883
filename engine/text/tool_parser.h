#pragma once
// GLM's tool-call markup in generated content, turned into calls as it streams. The chat template
// (chat_template.h) renders a call as
//
//   <tool_call>{name}<arg_key>{key}</arg_key><arg_value>{value}</arg_value>...</tool_call>
//
// and GLM-4.5/4.6 put a newline after the name and after each value; whitespace around the name,
// around a key and between the tags is a separator, not text. A value is written raw when it is a
// string and as JSON otherwise, so the tool's JSON schema says how to read it back: a property
// whose "type" admits "string" keeps the raw text; one whose type is only non-string kinds
// (number, integer, boolean, object, array, null) is parsed as JSON (the raw text when that
// fails); an undeclared property (or an unknown tool) is parsed only when it reads as a JSON
// object or array, and is a string otherwise.
//
// Content outside the calls passes through as it arrives. Whitespace that only separates content
// from a call, or calls from each other, is dropped: a turn "Let me check.\n<tool_call>..." has
// content "Let me check.". Text after a call that is not whitespace stays content (with the
// whitespace before it when content was shown earlier, so words do not run together).
//
// Bounds: a call whose text runs past max_call_bytes before "</tool_call>" is not parsed, and
// "<tool_call>" after max_calls calls is not a call; their text passes as content, as does a call
// that is malformed (no name, text outside the tags, a key without its value) or still open at the
// end. Argument JSON is parsed under json_limits::kRequestEmbedded (depth 64). Memory is
// O(max_call_bytes); each byte is scanned a bounded number of times, whatever the split.
//
// A tag can arrive split across feeds ("<tool_" + "call>"); any split of the same text gives the
// same content and the same calls.
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm {

struct ToolParserLimits {
  size_t max_calls = 64;                    // calls parsed in one generation
  size_t max_call_bytes = size_t(1) << 20;  // one call's text between its tags
};

struct ParsedToolCall {
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();  // in the order written
};

struct ToolParseDelta {
  std::string content;                // text to show as content now
  std::vector<ParsedToolCall> calls;  // calls completed by this piece of text, in order
};

class ToolCallParser {
 public:
  // `tools`: the request's OpenAI tool objects ({"type": "function", "function": {"name",
  // "parameters"}}), read for argument types.
  explicit ToolCallParser(std::vector<nlohmann::json> tools, ToolParserLimits limits = {});

  ToolParseDelta feed(std::string_view text);
  // The end of generation: held text is content (an unfinished call included).
  ToolParseDelta flush();

  size_t calls() const { return calls_; }

  // The whole text at once.
  static ToolParseDelta parse(std::string_view text, std::vector<nlohmann::json> tools,
                              ToolParserLimits limits = {});

 private:
  // Content text, holding trailing whitespace until it is known not to precede a call.
  void emit_content(std::string_view text, ToolParseDelta& out);
  // A call that is not one: "<tool_call>" and `rest` are content, with the whitespace before it.
  void give_up_call(const std::string& rest, ToolParseDelta& out);
  // One call's text between its tags; false when it is malformed.
  bool parse_call(std::string_view body, ParsedToolCall& call) const;
  nlohmann::ordered_json typed_value(const std::string& tool, const std::string& key,
                                     const std::string& raw) const;

  // Tool name -> its parameters' "properties" object.
  std::unordered_map<std::string, nlohmann::json> properties_;
  ToolParserLimits limits_;
  bool in_call_ = false;
  std::string held_;        // content mode: a possible "<tool_call>" prefix; call mode: the body
  size_t scanned_ = 0;      // call mode: held_[0, scanned_) holds no "</tool_call>"
  std::string whitespace_;  // trailing content whitespace not yet shown
  std::string call_whitespace_;  // the whitespace before the open call
  bool shown_ = false;           // content other than whitespace has been shown
  size_t calls_ = 0;
};

}  // namespace sparkglm
