#pragma once
// Stop strings over streamed output text. Text is released as soon as it cannot be the start of a
// stop string; a suffix that could be is held until the next delta settles it. When a stop string
// completes, the text before it is released and the stop string itself is not, as OpenAI does.
//
// The match is the stop string that completes first in the stream (ties: the one that starts
// first, i.e. the longer), which is what a token-by-token check sees; so feeding the same text in
// any split, down to byte by byte, releases the same text and matches the same stop.
//
// min_tokens: while the caller passes may_match = false (fewer than min_tokens tokens generated),
// no stop matches; text is released as usual except the longest suffix that could still begin a
// stop, so a stop string that begins before min_tokens and completes at or after it still matches.
// A stop counts only if it completes in a delta fed with may_match = true.
//
// Deltas should be whole UTF-8 characters (Utf8Stream's output); released text then is too, since
// a held suffix is a prefix of a (valid UTF-8) stop string.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sparkglm {

struct StopMatch {
  std::string text;                 // safe to emit now
  std::optional<std::string> stop;  // the stop string that ended generation, once
};

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);  // empty strings are ignored

  // After a stop has matched, further text is dropped.
  StopMatch feed(std::string_view delta, bool may_match = true);
  // At the end of generation without a stop: the held text, which turned out to be plain text.
  std::string flush();

  bool stopped() const { return stopped_; }
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace sparkglm
