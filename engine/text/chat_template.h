#pragma once
// GLM's chat format as a string; the tokenizer then turns the special-token texts ("[gMASK]",
// "<|user|>", "<think>", ...) into their ids. Two formats, picked by ChatTemplateOptions::format;
// each writes the same bytes as a published jinja template rendered the Hugging Face way
// (trim_blocks, lstrip_blocks, tojson = Python's json.dumps(ensure_ascii=False)).
//
// ChatFormat::kGlm53 (the default): GLM-5.3-Flash's chat_template.jinja.
//
//   [gMASK]<sop><|system|>Reasoning Effort: {Low|High|Max}      always, even with thinking off
//   <|system|>\n# Tools\n\n...<tools>\n{function}\n...</tools>\n\n...</tool_call>   tools given
//   <|system|>{content}                 system (and developer) messages, content as given
//   <|user|>{content}                   content as given
//   <|assistant|><think>{reasoning}</think>{content.strip()}{tool calls}
//   <|observation|><tool_response>{content}</tool_response>...   one per run of tool results
//   <|assistant|><think>                generation prompt, thinking on
//   <|assistant|><think></think>        generation prompt, thinking off
//
//   - No newline after any role token. Nothing separates turns.
//   - The effort line: reasoning_effort's level from the table in chat_template.cpp (the one place
//     the mapping lives): minimal, low -> Low; medium, high -> High; xhigh, max -> Max; none ->
//     thinking off, and the line says Max as for an unset effort; unset -> Max, the template's
//     default. The template itself takes only "low" and "high" and renders Max for anything else.
//   - Tools: each tool's "function" object (the tool itself if it has none), one per line, as
//     {"key": json, ...} with the key written raw and the "defer_loading" and "strict" keys left
//     out; a function whose defer_loading is truthy (Python's sense) is not listed.
//   - Assistant turns keep their reasoning in every turn, earlier ones included (the template's
//     clear_thinking is false by default and not offered here). Reasoning is reasoning_content
//     verbatim when it is set (even ""); otherwise, when content holds "</think>", the text before
//     the first "</think>" and after the last "<think>" before it, and the content becomes what
//     follows the last "</think>". No reasoning renders as "<think></think>". Content is stripped
//     of Python's whitespace (str.strip(), Unicode spaces included) and omitted when blank.
//   - Tool calls follow the content with no newline before, between or after them:
//     <tool_call>{name}<arg_key>{key}</arg_key><arg_value>{value}</arg_value>...</tool_call>,
//     a string value raw, any other value as json.dumps writes it.
//   - Tool results: the first of a run of consecutive tool messages writes "<|observation|>" and
//     the whole run; the others write nothing. The run follows the order of the preceding
//     assistant turn's tool_calls when it can: that turn exists and has calls, every result's
//     tool_call_id is non-empty, unique in the run and among the call ids, and every call id is
//     non-empty and unique. Otherwise message order. A call without a result writes nothing.
//   - Thinking off: the published GLM-5.3 checkpoint template has no switch (its prompt always
//     ends "<|assistant|><think>"); "<think></think>" is what the GLM-5.3 templates that add one
//     (and the template itself, for an assistant turn without reasoning) write.
//   Where this differs from the jinja, on purpose: a developer or observation message (the
//   template drops it) renders as system or tool; a JSON null assistant content renders as ""
//   (the template prints "None"); tools' keys come in nlohmann::json's (sorted) order, since the
//   request was parsed into one; a tool message's own "id" is not a fallback for tool_call_id.
//
// ChatFormat::kGlm45: GLM-4.5/4.6's chat_template, plus the effort hint, this project's addition.
//
//   [gMASK]<sop>
//   <|system|>\nReasoning Effort: High        only when reasoning_effort is set (table in .cpp)
//   <|system|>\n# Tools ... </tool_call>       only when tools are given
//   <|system|>\n{content}                       system (and developer) messages
//   <|user|>\n{content}[/nothink]               "/nothink" when thinking is off, as GLM does
//   <|assistant|>\n<think>{reasoning}</think>\n{content}\n<tool_call>...</tool_call>
//                                               reasoning kept only after the last user turn
//   <|observation|>\n<tool_response>\n{content}\n</tool_response>   one <|observation|> per run
//   <|assistant|>                               generation prompt, thinking on
//   <|assistant|>\n<think></think>              generation prompt, thinking off
//
// parse_chat_messages (chat_request.cpp) reads the OpenAI request body; every malformed field is
// a ChatFieldError naming its path ("messages[2].role").
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/error.h"

namespace sparkglm {

enum class ChatRole {
  kSystem,     // "system", and OpenAI's newer "developer"
  kUser,       // "user"
  kAssistant,  // "assistant"
  kTool,       // "tool", and GLM's own name for it, "observation"
};

// OpenAI's reasoning_effort values plus "max", the level GLM's checkpoints default to.
enum class ReasoningEffort { kNone, kMinimal, kLow, kMedium, kHigh, kXHigh, kMax };

const char* to_string(ReasoningEffort effort);  // the request spelling: "xhigh"
std::optional<ReasoningEffort> parse_reasoning_effort(std::string_view text);

// Which published template the prompt reproduces (rules above).
enum class ChatFormat {
  kGlm53,  // GLM-5.3-Flash, the model served
  kGlm45,  // GLM-4.5/4.6
};

struct ToolCall {
  std::string id;    // OpenAI's call id; orders GLM-5.3's tool results, never rendered
  std::string name;  // the function name
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();  // in the order given
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;  // text parts are joined with nothing between them, as GLM's template does
  // Set (even to "") means "use this", not "split <think>...</think> out of content".
  std::optional<std::string> reasoning_content;  // assistant only
  std::vector<ToolCall> tool_calls;              // assistant only
  std::string tool_call_id;                      // tool only; orders GLM-5.3's tool results
};

struct ChatTemplateOptions {
  ChatFormat format = ChatFormat::kGlm53;
  bool enable_thinking = true;
  // Unset: GLM-5.3 renders its default level (Max); GLM-4.5 renders no effort hint.
  std::optional<ReasoningEffort> reasoning_effort;
  bool add_generation_prompt = true;
  // OpenAI tool objects ({"type": "function", "function": {...}}): GLM-5.3 renders the function
  // object, GLM-4.5 the whole tool.
  std::vector<nlohmann::json> tools;
};

// Thinking is on unless either switch turns it off: enable_thinking false or effort "none".
// With thinking on, the prompt ends inside the reasoning, in both formats.
bool thinking_enabled(const ChatTemplateOptions& options);

std::string render_chat_prompt(const std::vector<ChatMessage>& messages,
                               const ChatTemplateOptions& options);

struct ChatRequestText {
  std::vector<ChatMessage> messages;
  ChatTemplateOptions options;

  std::string render() const { return render_chat_prompt(messages, options); }
};

// A malformed chat field: the message reads "<path>: <what is wrong>", and path() holds the path
// alone ("messages[2].content", "tools[0].function.parameters") for the server's `error.param`.
class ChatFieldError : public Error {
 public:
  ChatFieldError(ErrorKind kind, std::string path, const std::string& detail);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Reads `messages`, `tools`, `reasoning_effort` and `chat_template_kwargs` {enable_thinking,
// reasoning_effort}; chat_template_kwargs.reasoning_effort wins over the top-level field, because
// kwargs are the template's own inputs and the more specific request. A JSON null counts as absent.
// Other body fields (model, sampling, stop, ...) are read elsewhere and ignored here; the format
// is left at its default. Defined in chat_request.cpp.
ChatRequestText parse_chat_messages(const nlohmann::json& body);

}  // namespace sparkglm
