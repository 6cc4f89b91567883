#include "engine/server/output_text.h"

#include <utility>

namespace sparkglm::server {

namespace {

void append(ReasoningDelta& to, const ReasoningDelta& d) {
  to.reasoning += d.reasoning;
  to.content += d.content;
}

}  // namespace

OutputText::OutputText(const TokenCodec& codec, OutputTextOptions options)
    : codec_(codec),
      options_(std::move(options)),
      stops_(options_.stop),
      reasoning_(options_.split_reasoning && options_.starts_in_reasoning) {}

ReasoningDelta OutputText::route(std::string text) {
  if (!options_.split_reasoning) return {"", std::move(text)};
  return reasoning_.feed(text);
}

ReasoningDelta OutputText::add(int32_t id, bool terminal) {
  ++tokens_;
  if (options_.split_reasoning && reasoning_.in_reasoning()) ++reasoning_tokens_;
  if (stop_ || finished_ || terminal) return {};
  if (options_.skip_special_tokens && codec_.is_control(id)) return {};
  StopMatch m = stops_.feed(utf8_.feed(codec_.token_bytes(id)), tokens_ >= options_.min_tokens);
  if (m.stop) {
    stop_ = m.stop;
    if (options_.include_stop_str_in_output) m.text += *m.stop;
    // Nothing follows a stop string: the section parser releases what it held.
    ReasoningDelta d = route(std::move(m.text));
    if (options_.split_reasoning) append(d, reasoning_.flush());
    finished_ = true;
    return d;
  }
  return route(std::move(m.text));
}

ReasoningDelta OutputText::finish() {
  if (finished_) return {};
  finished_ = true;
  StopMatch m = stops_.feed(utf8_.flush(), tokens_ >= options_.min_tokens);
  std::string text = std::move(m.text);
  if (m.stop) {
    stop_ = m.stop;
    if (options_.include_stop_str_in_output) text += *m.stop;
  } else {
    text += stops_.flush();
  }
  ReasoningDelta d = route(std::move(text));
  if (options_.split_reasoning) append(d, reasoning_.flush());
  return d;
}

}  // namespace sparkglm::server
