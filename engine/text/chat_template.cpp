#include "engine/text/chat_template.h"

#include <array>

namespace sparkglm {

using nlohmann::json;

namespace {

// ---- reasoning_effort: the one table -------------------------------------------------------

// How each reasoning_effort renders, in both formats. GLM's checkpoints know three levels (Low,
// High, Max); the OpenAI levels between them map to the nearest one, so the model never sees a
// level it was not trained on. "none" turns thinking off instead.
//   GLM-5.3: "<|system|>Reasoning Effort: {level}" is always rendered, with kUnsetLevel when no
//     effort is set; "none" is rendered as unset. (Its template takes reasoning_effort "low" or
//     "high" and renders Max for anything else, so Low/High/Max here are its "low"/"high"/unset.)
//   GLM-4.5/4.6 have no effort input: a set effort, with thinking on, becomes a system turn
//     "<|system|>\nReasoning Effort: {level}" right after "[gMASK]<sop>".
struct EffortRendering {
  ReasoningEffort effort;
  std::string_view name;  // as spelled in a request
  bool thinks;            // false: thinking off
  std::string_view level;
};
constexpr std::string_view kUnsetLevel = "Max";  // GLM-5.3's default
constexpr std::array<EffortRendering, 7> kEffortRenderings{{
    {ReasoningEffort::kNone, "none", false, kUnsetLevel},
    {ReasoningEffort::kMinimal, "minimal", true, "Low"},
    {ReasoningEffort::kLow, "low", true, "Low"},
    {ReasoningEffort::kMedium, "medium", true, "High"},
    {ReasoningEffort::kHigh, "high", true, "High"},
    {ReasoningEffort::kXHigh, "xhigh", true, "Max"},
    {ReasoningEffort::kMax, "max", true, "Max"},
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

// ---- Python's string methods, as GLM's templates call them -----------------------------------

// Whether `c` is one whitespace character as Python's str.isspace sees it, in UTF-8: ASCII's
// \t..\r, \x1c..\x1f and space, and U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000.
bool is_py_space_char(std::string_view c) {
  if (c.size() == 1)
    return c[0] == ' ' || (c[0] >= '\t' && c[0] <= '\r') || (c[0] >= '\x1c' && c[0] <= '\x1f');
  if (c.size() == 2) return c == "\u0085" || c == "\u00a0";
  if (c.size() != 3) return false;
  if (c == "\u1680" || c == "\u2028" || c == "\u2029" || c == "\u202f" || c == "\u205f" ||
      c == "\u3000")
    return true;
  const auto last = static_cast<unsigned char>(c[2]);
  return c.starts_with("\xe2\x80") && last >= 0x80 && last <= 0x8a;  // U+2000..U+200A
}

// Byte length of the whitespace character `s` starts (ends) with, 0 if none.
size_t leading_space(std::string_view s) {
  for (size_t n = 1; n <= 3 && n <= s.size(); ++n)
    if (is_py_space_char(s.substr(0, n))) return n;
  return 0;
}

size_t trailing_space(std::string_view s) {
  for (size_t n = 1; n <= 3 && n <= s.size(); ++n)
    if (is_py_space_char(s.substr(s.size() - n))) return n;
  return 0;
}

std::string_view py_strip(std::string_view s) {
  while (const size_t n = leading_space(s)) s.remove_prefix(n);
  while (const size_t n = trailing_space(s)) s.remove_suffix(n);
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

// Python's truth value of a JSON value, as jinja's `if` tests it.
bool py_truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();  // json::empty() is false
  if (v.is_array() || v.is_object()) return !v.empty();
  return true;
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

// A tool-call argument value: a string raw, anything else as JSON.
void append_argument_value(const nlohmann::ordered_json& v, std::string& out) {
  if (v.is_string()) {
    out += v.get_ref<const std::string&>();
  } else {
    append_py_json(v, out);
  }
}

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

// An assistant turn's reasoning and content: reasoning_content when set, else split out of
// content at "</think>" (what precedes the first, after the last "<think>" before it; what
// follows the last), else no reasoning. Each format then trims the two its own way.
struct AssistantText {
  std::optional<std::string_view> reasoning;
  std::string_view content;
};

AssistantText split_assistant(const ChatMessage& m) {
  AssistantText t{std::nullopt, m.content};
  if (m.reasoning_content) {
    t.reasoning = *m.reasoning_content;
  } else if (const size_t close = t.content.find(kThinkClose); close != std::string_view::npos) {
    std::string_view before = t.content.substr(0, close);
    if (const size_t open = before.rfind(kThinkOpen); open != std::string_view::npos)
      before.remove_prefix(open + kThinkOpen.size());
    t.reasoning = before;
    t.content = t.content.substr(t.content.rfind(kThinkClose) + kThinkClose.size());
  }
  return t;
}

// ---- GLM-5.3-Flash ---------------------------------------------------------------------------

constexpr std::string_view kToolsPreamble =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
constexpr std::string_view kGlm53ToolsPostamble =
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key>"
    "<arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key>"
    "<arg_value>{arg-value-2}</arg_value>...</tool_call>";

void render_glm53_tools(const std::vector<json>& tools, std::string& out) {
  out += kToolsPreamble;
  for (const json& tool : tools) {
    const json& function = tool.is_object() && tool.contains("function") ? tool["function"] : tool;
    if (!function.is_object()) {
      append_py_json(function, out);
      out += '\n';
      continue;
    }
    if (const auto it = function.find("defer_loading"); it != function.end() && py_truthy(*it))
      continue;
    out += '{';
    bool first = true;
    for (auto it = function.begin(); it != function.end(); ++it) {
      if (it.key() == "defer_loading" || it.key() == "strict") continue;
      if (!first) out += ", ";
      first = false;
      out += '"';
      out += it.key();  // the template writes the key as is, unescaped
      out += "\": ";
      append_py_json(it.value(), out);
    }
    out += "}\n";
  }
  out += kGlm53ToolsPostamble;
}

void render_glm53_assistant(const ChatMessage& m, std::string& out) {
  const AssistantText t = split_assistant(m);
  out += "<|assistant|><think>";
  if (t.reasoning) out += *t.reasoning;
  out += "</think>";
  out += py_strip(t.content);
  for (const auto& call : m.tool_calls) {
    out += "<tool_call>";
    out += call.name;
    for (auto it = call.arguments.begin(); it != call.arguments.end(); ++it) {
      out += "<arg_key>";
      out += it.key();
      out += "</arg_key><arg_value>";
      append_argument_value(it.value(), out);
      out += "</arg_value>";
    }
    out += "</tool_call>";
  }
}

// The run of tool results [begin, end): in the calling turn's tool_calls order when every id
// pairs up one to one, else in message order.
void render_glm53_tool_results(const std::vector<ChatMessage>& messages, size_t begin, size_t end,
                               std::string& out) {
  static const std::vector<ToolCall> kNoCalls;
  const std::vector<ToolCall>& calls = begin > 0 && messages[begin - 1].role == ChatRole::kAssistant
                                           ? messages[begin - 1].tool_calls
                                           : kNoCalls;
  auto has_call = [&](const std::string& id) {
    for (const auto& c : calls)
      if (c.id == id) return true;
    return false;
  };
  bool in_call_order = !calls.empty();
  for (size_t k = begin; k < end && in_call_order; ++k) {
    const std::string& id = messages[k].tool_call_id;
    in_call_order = !id.empty() && has_call(id);
    for (size_t j = begin; j < end && in_call_order; ++j)
      if (j != k && messages[j].tool_call_id == id) in_call_order = false;
  }
  for (size_t i = 0; i < calls.size() && in_call_order; ++i) {
    in_call_order = !calls[i].id.empty();
    for (size_t j = i + 1; j < calls.size() && in_call_order; ++j)
      if (calls[j].id == calls[i].id) in_call_order = false;
  }
  auto respond = [&](const ChatMessage& m) {
    out += "<tool_response>";
    out += m.content;
    out += "</tool_response>";
  };
  out += "<|observation|>";
  if (in_call_order) {
    for (const auto& call : calls)
      for (size_t k = begin; k < end; ++k)
        if (messages[k].tool_call_id == call.id) respond(messages[k]);
  } else {
    for (size_t k = begin; k < end; ++k) respond(messages[k]);
  }
}

std::string render_glm53(const std::vector<ChatMessage>& messages,
                         const ChatTemplateOptions& options) {
  std::string out = "[gMASK]<sop><|system|>Reasoning Effort: ";
  out += options.reasoning_effort ? rendering_of(*options.reasoning_effort).level : kUnsetLevel;
  if (!options.tools.empty()) render_glm53_tools(options.tools, out);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    switch (m.role) {
      case ChatRole::kSystem:
        out += "<|system|>";
        out += m.content;
        break;
      case ChatRole::kUser:
        out += "<|user|>";
        out += m.content;
        break;
      case ChatRole::kAssistant:
        render_glm53_assistant(m, out);
        break;
      case ChatRole::kTool:
        if (i == 0 || messages[i - 1].role != ChatRole::kTool) {
          size_t end = i;
          while (end < messages.size() && messages[end].role == ChatRole::kTool) ++end;
          render_glm53_tool_results(messages, i, end, out);
        }
        break;
    }
  }
  if (options.add_generation_prompt)
    out += thinking_enabled(options) ? "<|assistant|><think>" : "<|assistant|><think></think>";
  return out;
}

// ---- GLM-4.5/4.6 -----------------------------------------------------------------------------

constexpr std::string_view kGlm45ToolsPostamble =
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n"
    "<arg_value>{arg-value-1}</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n"
    "<arg_value>{arg-value-2}</arg_value>\n...\n</tool_call>";

void render_glm45_tools(const std::vector<json>& tools, std::string& out) {
  out += kToolsPreamble;
  for (const auto& tool : tools) {
    append_py_json(tool, out);
    out += '\n';
  }
  out += kGlm45ToolsPostamble;
}

void render_glm45_assistant(const ChatMessage& m, bool keep_reasoning, std::string& out) {
  AssistantText t = split_assistant(m);
  if (!m.reasoning_content && t.reasoning) {
    // Split out of raw output: GLM-4.5 also drops the newlines around the tags.
    t.reasoning = strip_newlines_left(strip_newlines_right(*t.reasoning));
    t.content = strip_newlines_left(t.content);
  }
  out += "<|assistant|>\n<think>";
  // GLM drops reasoning from turns before the last user message: it answered an older question.
  if (keep_reasoning && t.reasoning) out += py_strip(*t.reasoning);
  out += "</think>";
  if (const auto text = py_strip(t.content); !text.empty()) {
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
      append_argument_value(it.value(), out);
      out += "</arg_value>\n";
    }
    out += "</tool_call>";
  }
}

std::string render_glm45(const std::vector<ChatMessage>& messages,
                         const ChatTemplateOptions& options) {
  const bool thinking = thinking_enabled(options);
  std::string out = "[gMASK]<sop>";
  if (thinking && options.reasoning_effort) {
    out += "<|system|>\nReasoning Effort: ";
    out += rendering_of(*options.reasoning_effort).level;
  }
  if (!options.tools.empty()) render_glm45_tools(options.tools, out);

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
        render_glm45_assistant(m, last_user == messages.size() || i > last_user, out);
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
  return options.enable_thinking &&
         (!options.reasoning_effort || rendering_of(*options.reasoning_effort).thinks);
}

std::string render_chat_prompt(const std::vector<ChatMessage>& messages,
                               const ChatTemplateOptions& options) {
  switch (options.format) {
    case ChatFormat::kGlm45:
      return render_glm45(messages, options);
    case ChatFormat::kGlm53:
      break;
  }
  return render_glm53(messages, options);
}

}  // namespace sparkglm
