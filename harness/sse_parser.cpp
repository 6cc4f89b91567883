#include "harness/sse_parser.h"

namespace sparkglm::harness {

void SseParser::feed(std::string_view bytes, std::vector<std::string>& events) {
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // the LF of a CRLF whose CR ended the previous fragment or byte
    }
    if (c == '\r') {
      after_cr_ = true;
      end_line(events);
    } else if (c == '\n') {
      end_line(events);
    } else {
      line_ += c;
    }
  }
}

void SseParser::end_line(std::vector<std::string>& events) {
  if (line_.empty()) {
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line_[0] == ':') {  // a comment (servers send them as keep-alives)
    line_.clear();
    return;
  }
  const size_t colon = line_.find(':');
  std::string_view name(line_);
  std::string_view value;
  if (colon != std::string::npos) {
    name = std::string_view(line_).substr(0, colon);
    value = std::string_view(line_).substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (name == "data") {
    if (has_data_) data_ += '\n';
    data_.append(value);
    has_data_ = true;
  }
  line_.clear();
}

}  // namespace sparkglm::harness
