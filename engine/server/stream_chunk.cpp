#include "engine/server/stream_chunk.h"

namespace sparkglm::server {

namespace {

// Length of the UTF-8 sequence at s[i], or 0 when it is not a well-formed one (overlong forms,
// surrogates and code points above U+10FFFF included), as RFC 3629 and nlohmann's decoder define
// it.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t b0 = byte(i);
  const size_t left = s.size() - i;
  auto cont = [&](size_t k) { return k < left && (byte(i + k) & 0xc0) == 0x80; };
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    if (!cont(1) || !cont(2)) return 0;
    const uint8_t b1 = byte(i + 1);
    if (b0 == 0xe0 && b1 < 0xa0) return 0;   // overlong
    if (b0 == 0xed && b1 >= 0xa0) return 0;  // surrogate
    return 3;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const uint8_t b1 = byte(i + 1);
    if (b0 == 0xf0 && b1 < 0x90) return 0;   // overlong
    if (b0 == 0xf4 && b1 >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

bool append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  const size_t start = out.size();
  out.reserve(start + s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = uint8_t(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence(s, i);
      if (n == 0) {
        out.resize(start);
        return false;
      }
      out.append(s.data() + i, n);
      i += n;
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += char(c);
        }
    }
    ++i;
  }
  out += '"';
  return true;
}

StreamChunk::StreamChunk(bool chat, std::string_view id, int64_t created, std::string_view model,
                         bool include_usage)
    : chat_(chat) {
  // dump() sorts keys: choices, created, id, model, object, usage.
  tail_ =
      chat ? R"(,"finish_reason":null,"index":0,"logprobs":null}],"created":)" : R"(}],"created":)";
  tail_ += std::to_string(created);
  tail_ += R"(,"id":)";
  usable_ = append_json_string(tail_, id);
  tail_ += R"(,"model":)";
  usable_ = usable_ && append_json_string(tail_, model);
  tail_ += chat ? R"(,"object":"chat.completion.chunk")" : R"(,"object":"text_completion")";
  if (include_usage) tail_ += R"(,"usage":null)";
  tail_ += "}\n\n";
}

bool StreamChunk::append_delta(std::string& out, std::string_view reasoning,
                               std::string_view content) const {
  if (!usable_) return false;
  const size_t start = out.size();
  bool ok = true;
  if (chat_) {
    out += R"(data: {"choices":[{"delta":{)";
    if (!content.empty()) {
      out += R"("content":)";
      ok = append_json_string(out, content);
    }
    if (ok && !reasoning.empty()) {
      // `reasoning` (vLLM's current name) and `reasoning_content` (its alias), in dump()'s order.
      if (!content.empty()) out += ',';
      out += R"("reasoning":)";
      const size_t value = out.size();
      ok = append_json_string(out, reasoning);
      if (ok) {
        const std::string literal = out.substr(value);
        out += R"(,"reasoning_content":)";
        out += literal;
      }
    }
    out += '}';
  } else {
    out += R"(data: {"choices":[{"finish_reason":null,"index":0,"logprobs":null,"text":)";
    ok = append_json_string(out, content);
  }
  if (!ok) {
    out.resize(start);
    return false;
  }
  out += tail_;
  return true;
}

}  // namespace sparkglm::server
