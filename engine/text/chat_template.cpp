#include "engine/text/chat_template.h"

#include <array>

#include "engine/core/error.h"

namespace sparkglm {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// How each reasoning_effort renders. GLM-4.5/4.6 have no effort input, so a set effort becomes a
// system turn "<|system|>\nReasoning Effort: {hint}" right after "[gMASK]<sop>". The hints are the
// only three levels GLM's own checkpoint template knows (Low, High, Max); the OpenAI levels between
// them map to the nearest one, so the model never sees a level it was not trained on. "none" turns
// thinking off instead of rendering a hint.
struct EffortRendering {
  ReasoningEffort effort;
  std::string_view name;  // as spelled in a request
  std::string_view hint;  // empty: no hint, thinking off
};
constexpr std::array<EffortRendering, 7> kEffortRenderings{{
    {ReasoningEffort::kNone, "none", ""},
    {ReasoningEffort::kMinimal, "minimal", "Low"},
    {ReasoningEffort::kLow, "low", "Low"},
    {ReasoningEffort::kMedium, "medium", "High"},
    {ReasoningEffort::kHigh, "high", "High"},
    {ReasoningEffort::kXHigh, "xhigh", "Max"},
    {ReasoningEffort::kMax, "max", "Max"},
}};

constexpr bool rows_follow_the_enum() {
  for (size_t i = 0; i < kEffortRenderings.size(); ++i)
    if (size_t(kEffortRenderings[i].effort) != i) return false;
  return true;
}
static_assert(rows_follow_the_enum(), "kEffortRenderings is indexed by ReasoningEffort");

const EffortRendering& rendering_of(ReasoningEffort effort) {
  return kEffortRenderings[size_t(effort)];
}

// ---- Python's string methods, as GLM's template calls them ----------------------------------

// ASCII whitespace as Python's str.strip() sees it; Unicode spaces (U+00A0, U+3000, ...) are not
// stripped here, a byte-level difference only for content that starts or ends with one.
bool is_py_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

std::string_view py_strip(std::string_view s) {
  while (!s.empty() && is_py_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_py_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view strip_newlines_left(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

std::string_view strip_newlines_right(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// ---- JSON as Python's json.dumps(ensure_ascii=False) writes it: ", " and ": " separators ------

template <typename Json>
void append_py_json(const Json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += ", ";
      first = false;
      out += Json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace);
      out += ": ";
      append_py_json(it.value(), out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      append_py_json(v[i], out);
    }
    out += ']';
  } else {
    // Scalars match Python's (same escapes, shortest round-trip doubles), except in [1e15, 1e16):
    // nlohmann writes 1e+15 where Python writes 1000000000000000.0.
    out += v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

// ---- Rendering -------------------------------------------------------------------------------

constexpr std::string_view kToolsPreamble =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
constexpr std::string_view kToolsPostamble =
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
    "<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n"
    "<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>";

void render_tools(const std::vector<json>& tools, std::string& out) {
  out += kToolsPreamble;
  for (const auto& tool : tools) {
    append_py_json(tool, out);
    out += '\n';
  }
  out += kToolsPostamble;
}

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

void render_assistant(const ChatMessage& m, bool keep_reasoning, std::string& out) {
  std::string_view content = m.content;
  std::string_view reasoning;
  if (m.reasoning_content) {
    reasoning = *m.reasoning_content;
  } else if (const size_t close = content.find(kThinkClose); close != std::string_view::npos) {
    // A client that echoes raw output back: the reasoning is what precedes the first </think>
    // (after its last <think>), the content what follows the last one.
    std::string_view before = strip_newlines_right(content.substr(0, close));
    if (const size_t open = before.rfind(kThinkOpen); open != std::string_view::npos)
      before.remove_prefix(open + kThinkOpen.size());
    reasoning = strip_newlines_left(before);
    content = strip_newlines_left(content.substr(content.rfind(kThinkClose) + kThinkClose.size()));
  }
  out += "<|assistant|>\n<think>";
  // GLM drops reasoning from turns before the last user message: it answered an older question.
  if (keep_reasoning) out += py_strip(reasoning);
  out += "</think>";
  if (const auto text = py_strip(content); !text.empty()) {
    out += '\n';
    out += text;
  }
  for (const auto& call : m.tool_calls) {
    out += "\n<tool_call>";
    out += call.name;
    out += '\n';
    for (auto it = call.arguments.begin(); it != call.arguments.end(); ++it) {
      out += "<arg_key>";
      out += it.key();
      out += "</arg_key>\n<arg_value>";
      if (it.value().is_string()) {
        out += it.value().get_ref<const std::string&>();
      } else {
        append_py_json(it.value(), out);
      }
      out += "</arg_value>\n";
    }
    out += "</tool_call>";
  }
}

}  // namespace

const char* to_string(ReasoningEffort effort) {
  return rendering_of(effort).name.data();
}

std::optional<ReasoningEffort> parse_reasoning_effort(std::string_view text) {
  for (const auto& r : kEffortRenderings)
    if (r.name == text) return r.effort;
  return std::nullopt;
}

bool thinking_enabled(const ChatTemplateOptions& options) {
  return options.enable_thinking && options.reasoning_effort != ReasoningEffort::kNone;
}

std::string render_chat_prompt(const std::vector<ChatMessage>& messages,
                               const ChatTemplateOptions& options) {
  const bool thinking = thinking_enabled(options);
  std::string out = "[gMASK]<sop>";
  if (thinking && options.reasoning_effort) {
    out += "<|system|>\nReasoning Effort: ";
    out += rendering_of(*options.reasoning_effort).hint;
  }
  if (!options.tools.empty()) render_tools(options.tools, out);

  size_t last_user = messages.size();  // "none" until a user turn is seen
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == ChatRole::kUser) last_user = i;

  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    switch (m.role) {
      case ChatRole::kSystem:
        out += "<|system|>\n";
        out += m.content;
        break;
      case ChatRole::kUser:
        out += "<|user|>\n";
        out += m.content;
        // GLM-4.5/4.6 were trained to answer a "/nothink" user turn without reasoning.
        if (!thinking && !std::string_view(m.content).ends_with("/nothink")) out += "/nothink";
        break;
      case ChatRole::kAssistant:
        render_assistant(m, last_user == messages.size() || i > last_user, out);
        break;
      case ChatRole::kTool:
        // Consecutive tool results share one observation turn.
        if (i == 0 || messages[i - 1].role != ChatRole::kTool) out += "<|observation|>";
        out += "\n<tool_response>\n";
        out += m.content;
        out += "\n</tool_response>";
        break;
    }
  }
  if (options.add_generation_prompt)
    out += thinking ? "<|assistant|>" : "<|assistant|>\n<think></think>";
  return out;
}

// ---- Parsing the OpenAI request ------------------------------------------------------------

namespace {

std::string describe(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

[[noreturn]] void bad(const std::string& path, const std::string& expected, const json& got) {
  throw Error(ErrorKind::kInvalidArgument,
              path + ": expected " + expected + ", got " + describe(got));
}

[[noreturn]] void missing(const std::string& path, const std::string& expected) {
  throw Error(ErrorKind::kInvalidArgument, path + ": expected " + expected + ", got nothing");
}

// The member, or nullptr where it is absent or null (OpenAI clients send null for "not set").
const json* member(const json& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string effort_names() {
  std::string names;
  for (const auto& r : kEffortRenderings)
    names += (names.empty() ? "" : ", ") + std::string(r.name);
  return "one of " + names;
}

std::optional<ReasoningEffort> read_effort(const json& object, const std::string& path) {
  const json* v = member(object, "reasoning_effort");
  if (!v) return std::nullopt;
  if (!v->is_string()) bad(path, effort_names(), *v);
  const auto effort = parse_reasoning_effort(v->get_ref<const std::string&>());
  if (!effort) bad(path, effort_names(), *v);
  return effort;
}

ChatRole read_role(const json& message, const std::string& path) {
  const json* v = member(message, "role");
  const char* expected = "one of system, developer, user, assistant, tool, observation";
  if (!v) missing(path, expected);
  if (!v->is_string()) bad(path, expected, *v);
  const auto& s = v->get_ref<const std::string&>();
  if (s == "system" || s == "developer") return ChatRole::kSystem;
  if (s == "user") return ChatRole::kUser;
  if (s == "assistant") return ChatRole::kAssistant;
  if (s == "tool" || s == "observation") return ChatRole::kTool;
  bad(path, expected, *v);
}

std::string read_content(const json& message, ChatRole role, const std::string& path) {
  const char* expected = "a string or an array of {\"type\": \"text\", \"text\": ...} parts";
  const json* v = member(message, "content");
  if (!v) {
    // An assistant turn that only calls tools has no content.
    if (role == ChatRole::kAssistant) return "";
    missing(path, expected);
  }
  if (v->is_string()) return v->get<std::string>();
  if (!v->is_array()) bad(path, expected, *v);
  std::string text;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& part = (*v)[i];
    const std::string part_path = path + "[" + std::to_string(i) + "]";
    if (!part.is_object()) bad(part_path, "a {\"type\": \"text\", \"text\": ...} object", part);
    const json* type = member(part, "type");
    if (!type) missing(part_path + ".type", "\"text\"");
    if (!type->is_string()) bad(part_path + ".type", "\"text\"", *type);
    if (*type != "text")
      throw Error(ErrorKind::kUnsupported, part_path + ".type: this server reads text only; got " +
                                               describe(*type) + ", expected \"text\"");
    const json* part_text = member(part, "text");
    if (!part_text) missing(part_path + ".text", "a string");
    if (!part_text->is_string()) bad(part_path + ".text", "a string", *part_text);
    text += part_text->get_ref<const std::string&>();
  }
  return text;
}

ordered_json read_arguments(const json& function, const std::string& path) {
  const char* expected = "a JSON object, or a string holding one";
  const json* v = member(function, "arguments");
  if (!v) return ordered_json::object();
  if (v->is_object()) return ordered_json(*v);
  if (!v->is_string()) bad(path, expected, *v);
  const auto& s = v->get_ref<const std::string&>();
  if (py_strip(s).empty()) return ordered_json::object();
  // Parsed here, not taken from the json body, so the arguments keep the order the model wrote.
  ordered_json args = ordered_json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (!args.is_object()) bad(path, expected, *v);
  return args;
}

std::vector<ToolCall> read_tool_calls(const json& calls, const std::string& path) {
  if (!calls.is_array()) bad(path, "an array of tool calls", calls);
  std::vector<ToolCall> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& call = calls[i];
    const std::string call_path = path + "[" + std::to_string(i) + "]";
    if (!call.is_object()) bad(call_path, "a tool call object", call);
    ToolCall tc;
    if (const json* id = member(call, "id")) {
      if (!id->is_string()) bad(call_path + ".id", "a string", *id);
      tc.id = id->get<std::string>();
    }
    const json* function = member(call, "function");
    if (!function) missing(call_path + ".function", "an object with name and arguments");
    if (!function->is_object())
      bad(call_path + ".function", "an object with name and arguments", *function);
    const json* name = member(*function, "name");
    if (!name) missing(call_path + ".function.name", "a non-empty string");
    if (!name->is_string() || name->get_ref<const std::string&>().empty())
      bad(call_path + ".function.name", "a non-empty string", *name);
    tc.name = name->get<std::string>();
    tc.arguments = read_arguments(*function, call_path + ".function.arguments");
    out.push_back(std::move(tc));
  }
  return out;
}

ChatMessage read_message(const json& message, const std::string& path) {
  if (!message.is_object()) bad(path, "a message object", message);
  ChatMessage m;
  m.role = read_role(message, path + ".role");
  m.content = read_content(message, m.role, path + ".content");
  const bool assistant = m.role == ChatRole::kAssistant;
  if (const json* r = member(message, "reasoning_content")) {
    if (!assistant) bad(path + ".reasoning_content", "no reasoning outside assistant turns", *r);
    if (!r->is_string()) bad(path + ".reasoning_content", "a string", *r);
    m.reasoning_content = r->get<std::string>();
  }
  if (const json* calls = member(message, "tool_calls")) {
    if (!assistant) bad(path + ".tool_calls", "no tool calls outside assistant turns", *calls);
    m.tool_calls = read_tool_calls(*calls, path + ".tool_calls");
  }
  if (const json* id = member(message, "tool_call_id")) {
    if (!id->is_string()) bad(path + ".tool_call_id", "a string", *id);
    m.tool_call_id = id->get<std::string>();
  }
  return m;
}

std::vector<json> read_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "an array of {\"type\": \"function\", ...} objects", tools);
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    const std::string path = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) bad(path, "a {\"type\": \"function\", \"function\": ...} object", tool);
    if (const json* type = member(tool, "type"); type && *type != "function")
      bad(path + ".type", "\"function\"", *type);
    const json* function = member(tool, "function");
    if (!function) missing(path + ".function", "an object with a name");
    if (!function->is_object()) bad(path + ".function", "an object with a name", *function);
    const json* name = member(*function, "name");
    if (!name) missing(path + ".function.name", "a non-empty string");
    if (!name->is_string() || name->get_ref<const std::string&>().empty())
      bad(path + ".function.name", "a non-empty string", *name);
  }
  return tools.get<std::vector<json>>();
}

}  // namespace

ChatRequestText parse_chat_messages(const json& body) {
  if (!body.is_object()) bad("body", "a JSON object", body);
  ChatRequestText request;
  const json* messages = member(body, "messages");
  if (!messages) missing("messages", "a non-empty array of messages");
  if (!messages->is_array() || messages->empty())
    bad("messages", "a non-empty array of messages", *messages);
  for (size_t i = 0; i < messages->size(); ++i)
    request.messages.push_back(read_message((*messages)[i], "messages[" + std::to_string(i) + "]"));

  if (const json* tools = member(body, "tools")) request.options.tools = read_tools(*tools);
  request.options.reasoning_effort = read_effort(body, "reasoning_effort");
  if (const json* kwargs = member(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) bad("chat_template_kwargs", "an object", *kwargs);
    if (const json* thinking = member(*kwargs, "enable_thinking")) {
      if (!thinking->is_boolean())
        bad("chat_template_kwargs.enable_thinking", "true or false", *thinking);
      request.options.enable_thinking = thinking->get<bool>();
    }
    if (auto effort = read_effort(*kwargs, "chat_template_kwargs.reasoning_effort"))
      request.options.reasoning_effort = effort;
  }
  return request;
}

}  // namespace sparkglm
