#pragma once
// The one SSE chunk a stream sends per generated token, written as text instead of built as a JSON
// document: a decode step of a small model takes about 0.1 ms, and a DOM per token cost a
// noticeable share of it. The bytes equal what nlohmann::json's dump() makes of the same chunk
// (keys sorted, no spaces, non-ASCII kept, invalid UTF-8 replaced); a test holds the two together.
//
// Only the plain shape is written here: a text delta with no logprobs and no token ids. Anything
// richer takes the JSON path in GenerationCall.
#include <cstdint>
#include <string>
#include <string_view>

namespace sparkglm::server {

// Appends `s` as a JSON string literal, quotes included, escaped as nlohmann::json::dump escapes
// with ensure_ascii off. Returns false, appending nothing, when `s` is not valid UTF-8 (the JSON
// path then replaces the bad bytes the way dump's error_handler_t::replace does).
bool append_json_string(std::string& out, std::string_view s);

// The constant parts of one stream's chunks, serialised once per request.
class StreamChunk {
 public:
  // chat: "chat.completion.chunk" chunks with a `delta`; otherwise "text_completion" with `text`.
  // include_usage adds the `"usage":null` every chunk but the usage chunk carries.
  StreamChunk(bool chat, std::string_view id, int64_t created, std::string_view model,
              bool include_usage);

  // Appends `data: {...}\n\n` for a delta of `reasoning` and `content` (chat: either may be
  // empty and is then left out; completions: content only). False, appending nothing, when the
  // text is not valid UTF-8.
  bool append_delta(std::string& out, std::string_view reasoning, std::string_view content) const;

 private:
  bool chat_;
  bool usable_ = true;  // false when the id or the model name is not valid UTF-8
  std::string tail_;    // `,"created":...,"object":"..."` up to the closing brace
};

}  // namespace sparkglm::server
