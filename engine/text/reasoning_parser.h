#pragma once
// Splits generated text into OpenAI's reasoning_content and content, as it streams.
//
// With thinking on, generation starts inside the reasoning: GLM-4.5/4.6 first write "\n<think>"
// themselves (the prompt ended "<|assistant|>"), later GLM templates put "<think>" in the prompt;
// both are accepted, so an opening <think> before any reasoning text is dropped. Reasoning ends at
// the first "</think>"; everything after it is content, tags included. With thinking rendered
// closed ("<think></think>" in the prompt), everything is content.
//
// The newlines GLM's format puts after "<|assistant|>", "<think>" and "</think>" are separators,
// not text: newlines at the start of the reasoning and at the start of the content are dropped.
//
// A tag can arrive split across deltas ("</th" + "ink>"), so a suffix that could begin one is held
// back until the next delta settles it; any split of the same text gives the same concatenation.
#include <string>
#include <string_view>

namespace sparkglm {

struct ReasoningDelta {
  std::string reasoning;  // goes to reasoning_content
  std::string content;    // goes to content

  bool empty() const { return reasoning.empty() && content.empty(); }
};

class ReasoningParser {
 public:
  // starts_in_reasoning: thinking_enabled() for the rendered prompt.
  explicit ReasoningParser(bool starts_in_reasoning);

  // The text that can be attributed now; a possible partial tag stays held.
  ReasoningDelta feed(std::string_view text);
  // At the end of generation: what was held is plain text of the current section.
  ReasoningDelta flush();

  bool in_reasoning() const {
    return state_ == State::kReasoningStart || state_ == State::kReasoning;
  }

  // The whole text at once.
  static ReasoningDelta parse(std::string_view text, bool starts_in_reasoning);

 private:
  enum class State {
    kReasoningStart,  // no reasoning text yet: newlines and one "<think>" are dropped
    kReasoning,
    kContentStart,  // no content text yet: newlines are dropped
    kContent,
  };
  State state_;
  bool saw_open_tag_ = false;  // only one leading "<think>" is a tag
  std::string held_;           // unattributed text: a possible tag prefix
};

}  // namespace sparkglm
