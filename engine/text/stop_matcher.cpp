#include "engine/text/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace sparkglm {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatch StopMatcher::feed(std::string_view delta, bool may_match) {
  StopMatch out;
  if (stopped_) return out;
  const size_t old = held_.size();
  held_ += delta;
  const std::string_view text = held_;

  // The stop that completes first among those that end in the new delta. (Held text can hold a
  // whole stop only if it went by while matching was off; such a stop does not count.)
  size_t best_start = std::string_view::npos;
  size_t best_end = std::string_view::npos;
  const std::string* best = nullptr;
  for (const auto& s : stops_) {
    if (!may_match) break;
    const size_t from = old + 1 > s.size() ? old + 1 - s.size() : 0;
    const size_t start = text.find(s, from);
    if (start == std::string_view::npos) continue;
    const size_t end = start + s.size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
      best = &s;
    }
  }
  if (best) {
    out.text = std::string(text.substr(0, best_start));
    out.stop = *best;
    stopped_ = true;
    held_.clear();
    return out;
  }

  // Hold the longest suffix that is a proper prefix of some stop; every earlier position can no
  // longer start a match, so the text before it is final.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(text.size(), s.size() - 1); k > hold; --k) {
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  out.text = std::string(text.substr(0, text.size() - hold));
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace sparkglm
