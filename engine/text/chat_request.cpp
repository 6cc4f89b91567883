// parse_chat_messages: the OpenAI chat request body as ChatRequestText (declared in
// chat_template.h, which the server includes).
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/text/chat_template.h"

namespace sparkglm {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::string describe(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

[[noreturn]] void bad(const std::string& path, const std::string& expected, const json& got) {
  throw ChatFieldError(ErrorKind::kInvalidArgument, path,
                       "expected " + expected + ", got " + describe(got));
}

[[noreturn]] void missing(const std::string& path, const std::string& expected) {
  throw ChatFieldError(ErrorKind::kInvalidArgument, path, "expected " + expected + ", got nothing");
}

// The member, or nullptr where it is absent or null (OpenAI clients send null for "not set").
const json* member(const json& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string effort_names() {
  std::string names;
  for (int e = int(ReasoningEffort::kNone); e <= int(ReasoningEffort::kMax); ++e)
    names += (names.empty() ? "" : ", ") + std::string(to_string(ReasoningEffort(e)));
  return "one of " + names;
}

// Blank as the JSON parser sees it: only its four whitespace characters.
bool is_blank(std::string_view s) {
  return s.find_first_not_of(" \t\n\r") == std::string_view::npos;
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
      throw ChatFieldError(
          ErrorKind::kUnsupported, part_path + ".type",
          "this server reads text only; got " + describe(*type) + ", expected \"text\"");
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
  if (is_blank(s)) return ordered_json::object();
  // Parsed here, not taken from the json body, so the arguments keep the order the model wrote;
  // bounded like the body, since the chat template renders them recursively.
  ordered_json args;
  try {
    args = parse_ordered_json(s, path, ErrorKind::kInvalidArgument, json_limits::kRequestEmbedded);
  } catch (const Error& e) {  // "<path>: <the parser's words>"
    const std::string& m = e.message();
    throw ChatFieldError(e.kind(), path,
                         m.starts_with(path + ": ") ? m.substr(path.size() + 2) : m);
  }
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

// `name` is accepted and unused: GLM's template has no place for a participant's name.
bool known_message_field(const std::string& key) {
  for (const char* k :
       {"role", "content", "reasoning", "reasoning_content", "tool_calls", "tool_call_id", "name"})
    if (key == k) return true;
  return false;
}

ChatMessage read_message(const json& message, const std::string& path) {
  if (!message.is_object()) bad(path, "a message object", message);
  ChatMessage m;
  m.role = read_role(message, path + ".role");
  m.content = read_content(message, m.role, path + ".content");
  const bool assistant = m.role == ChatRole::kAssistant;
  for (auto it = message.begin(); it != message.end(); ++it)
    if (!it->is_null() && !known_message_field(it.key()))
      throw ChatFieldError(ErrorKind::kInvalidArgument, path + "." + it.key(),
                           "not a message field this server reads (role, content, reasoning, "
                           "reasoning_content, tool_calls, tool_call_id, name)");
  // vLLM's current name is `reasoning`; `reasoning_content` is the older one. Both are read.
  for (const char* name : {"reasoning", "reasoning_content"}) {
    const json* r = member(message, name);
    if (!r) continue;
    const std::string field = path + "." + name;
    if (!assistant) bad(field, "no reasoning outside assistant turns", *r);
    if (!r->is_string()) bad(field, "a string", *r);
    if (m.reasoning_content && *m.reasoning_content != r->get_ref<const std::string&>())
      bad(field, "the same text as " + path + ".reasoning when both are given", *r);
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
  std::map<std::string, size_t> first_with_name;
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
    // A call names its tool: two tools of one name leave the call's schema ambiguous.
    const auto [first, unique] = first_with_name.emplace(name->get<std::string>(), i);
    if (!unique)
      throw ChatFieldError(ErrorKind::kInvalidArgument, path + ".function.name",
                           "the name " + describe(*name) + " is also tools[" +
                               std::to_string(first->second) + "]'s; tool names must be unique");
    // The template renders the schema, the tool-call grammar and parser read its properties.
    if (const json* parameters = member(*function, "parameters");
        parameters && !parameters->is_object())
      bad(path + ".function.parameters", "a JSON Schema object", *parameters);
  }
  return tools.get<std::vector<json>>();
}

}  // namespace

ChatFieldError::ChatFieldError(ErrorKind kind, std::string path, const std::string& detail)
    : Error(kind, path + ": " + detail), path_(std::move(path)) {}

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
    for (auto it = kwargs->begin(); it != kwargs->end(); ++it)
      if (!it->is_null() && it.key() != "enable_thinking" && it.key() != "reasoning_effort")
        throw ChatFieldError(
            ErrorKind::kInvalidArgument, "chat_template_kwargs." + it.key(),
            "not a switch of this chat template (enable_thinking, reasoning_effort)");
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
