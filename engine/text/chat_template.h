#pragma once
// GLM's chat format as a string: the renderer writes the same bytes GLM-4.5/4.6's published
// chat_template writes (Hugging Face jinja with trim_blocks and lstrip_blocks), and the tokenizer
// then turns the special-token texts ("[gMASK]", "<|user|>", "<think>", ...) into their ids.
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
// parse_chat_messages reads the OpenAI request body; every malformed field is an
// Error(kInvalidArgument) naming its path ("messages[2].role").
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

struct ToolCall {
  std::string id;    // OpenAI's call id; GLM's format does not render it
  std::string name;  // the function name
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();  // in the order given
};

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;  // text parts are joined with nothing between them, as GLM's template does
  // Set (even to "") means "use this", not "split <think>...</think> out of content".
  std::optional<std::string> reasoning_content;  // assistant only
  std::vector<ToolCall> tool_calls;              // assistant only
  std::string tool_call_id;                      // tool only; GLM's format does not render it
};

struct ChatTemplateOptions {
  bool enable_thinking = true;
  std::optional<ReasoningEffort> reasoning_effort;  // unset: no effort hint is rendered
  bool add_generation_prompt = true;
  // OpenAI tool objects ({"type": "function", "function": {...}}), rendered whole as GLM does.
  std::vector<nlohmann::json> tools;
};

// Thinking is on unless either switch turns it off: enable_thinking false or effort "none".
bool thinking_enabled(const ChatTemplateOptions& options);

std::string render_chat_prompt(const std::vector<ChatMessage>& messages,
                               const ChatTemplateOptions& options);

struct ChatRequestText {
  std::vector<ChatMessage> messages;
  ChatTemplateOptions options;

  std::string render() const { return render_chat_prompt(messages, options); }
};

// Reads `messages`, `tools`, `reasoning_effort` and `chat_template_kwargs` {enable_thinking,
// reasoning_effort}; chat_template_kwargs.reasoning_effort wins over the top-level field, because
// kwargs are the template's own inputs and the more specific request. A JSON null counts as absent.
// Other body fields (model, sampling, stop, ...) are read elsewhere and ignored here.
ChatRequestText parse_chat_messages(const nlohmann::json& body);

}  // namespace sparkglm
