#include "engine/text/reasoning_parser.h"

#include <algorithm>
#include <utility>

namespace sparkglm {

namespace {

constexpr std::string_view kOpenTag = "<think>";
constexpr std::string_view kCloseTag = "</think>";

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(text.size(), tag.size() - 1); k > 0; --k)
    if (text.substr(text.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

std::string_view drop_leading_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

}  // namespace

ReasoningParser::ReasoningParser(bool starts_in_reasoning)
    : state_(starts_in_reasoning ? State::kReasoningStart : State::kContentStart) {}

ReasoningDelta ReasoningParser::feed(std::string_view text) {
  held_ += text;
  ReasoningDelta out;
  std::string_view rest = held_;
  bool more = true;
  while (more) {
    switch (state_) {
      case State::kReasoningStart:
        rest = drop_leading_newlines(rest);
        if (!saw_open_tag_ && rest.starts_with(kOpenTag)) {
          rest.remove_prefix(kOpenTag.size());
          saw_open_tag_ = true;
        } else if (rest.empty() || (!saw_open_tag_ && kOpenTag.starts_with(rest))) {
          more = false;  // nothing yet, or "<thi" that may still become the opening tag
        } else {
          state_ = State::kReasoning;
        }
        break;
      case State::kReasoning:
        if (const size_t close = rest.find(kCloseTag); close != std::string_view::npos) {
          out.reasoning += rest.substr(0, close);
          rest.remove_prefix(close + kCloseTag.size());
          state_ = State::kContentStart;
        } else {
          const size_t emit = rest.size() - partial_tag_suffix(rest, kCloseTag);
          out.reasoning += rest.substr(0, emit);
          rest.remove_prefix(emit);
          more = false;
        }
        break;
      case State::kContentStart:
        rest = drop_leading_newlines(rest);
        if (rest.empty()) {
          more = false;
        } else {
          state_ = State::kContent;
        }
        break;
      case State::kContent:
        out.content += rest;
        rest = {};
        more = false;
        break;
    }
  }
  held_ = std::string(rest);
  return out;
}

ReasoningDelta ReasoningParser::flush() {
  ReasoningDelta out;
  (in_reasoning() ? out.reasoning : out.content) = std::move(held_);
  held_.clear();
  return out;
}

ReasoningDelta ReasoningParser::parse(std::string_view text, bool starts_in_reasoning) {
  ReasoningParser parser(starts_in_reasoning);
  ReasoningDelta out = parser.feed(text);
  const ReasoningDelta tail = parser.flush();
  out.reasoning += tail.reasoning;
  out.content += tail.content;
  return out;
}

}  // namespace sparkglm
