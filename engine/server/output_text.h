#pragma once
// The text of one generation as it streams: token bytes -> whole UTF-8 characters (Utf8Stream) ->
// stop strings (StopMatcher) -> reasoning/content (ReasoningParser, chat only). Each add() returns
// the text a client may see now; text that could still turn out to be a stop string or a tag is
// held until it is settled.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/server/token_codec.h"
#include "engine/text/reasoning_parser.h"
#include "engine/text/stop_matcher.h"
#include "engine/text/utf8_stream.h"

namespace sparkglm::server {

struct OutputTextOptions {
  std::vector<std::string> stop;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  bool split_reasoning = false;      // chat: reasoning_content apart from content
  bool starts_in_reasoning = false;  // thinking on in the rendered prompt
  int min_tokens = 0;  // stop strings only count from the min_tokens-th token on (vLLM's rule)
};

class OutputText {
 public:
  OutputText(const TokenCodec& codec, OutputTextOptions options);

  // One generated token. A `terminal` token (the eos or stop token id that ended the sequence)
  // counts but shows no text. After a stop string matched, tokens only count.
  ReasoningDelta add(int32_t id, bool terminal = false);
  // The end of generation: releases what was held.
  ReasoningDelta finish();

  // The stop string that ended the text, once one has matched.
  const std::optional<std::string>& stop_string() const { return stop_; }
  int tokens() const { return tokens_; }
  // Tokens generated while the reasoning section was open (the closing tag's token included).
  int reasoning_tokens() const { return reasoning_tokens_; }

 private:
  ReasoningDelta route(std::string text);

  const TokenCodec& codec_;
  OutputTextOptions options_;
  Utf8Stream utf8_;
  StopMatcher stops_;
  ReasoningParser reasoning_;
  std::optional<std::string> stop_;
  bool finished_ = false;
  int tokens_ = 0, reasoning_tokens_ = 0;
};

}  // namespace sparkglm::server
