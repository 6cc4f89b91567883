#include "engine/text/utf8_stream.h"

#include <cstdint>

namespace sparkglm {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length a lead byte announces; 0 for a byte that cannot start a character (a continuation
// byte, C0/C1 which only start overlong forms, F5..FF which start code points above U+10FFFF).
int sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// The second byte is where overlong forms, surrogates and values above U+10FFFF show.
bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

// Appends the decodable characters of `in` to `out` and returns how many bytes were used. An
// incomplete final sequence is left unused, or with `final` becomes one U+FFFD.
size_t decode(std::string_view in, std::string& out, bool final) {
  size_t i = 0;
  while (i < in.size()) {
    const auto lead = uint8_t(in[i]);
    const size_t n = size_t(sequence_length(lead));
    if (n == 1) {
      out += in[i++];
      continue;
    }
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    size_t j = i + 1;
    bool ill_formed = false;
    for (; j < i + n && j < in.size(); ++j) {
      const auto b = uint8_t(in[j]);
      if (!(j == i + 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF))) {
        ill_formed = true;
        break;
      }
    }
    if (ill_formed) {
      out += kReplacement;  // for in[i, j); in[j] may start the next character
      i = j;
    } else if (j < i + n) {
      if (!final) return i;  // wait for the rest of this character
      out += kReplacement;
      return in.size();
    } else {
      out.append(in.substr(i, n));
      i += n;
    }
  }
  return i;
}

}  // namespace

std::string Utf8Stream::feed(std::string_view bytes) {
  held_ += bytes;
  std::string out;
  held_.erase(0, decode(held_, out, /*final=*/false));
  return out;
}

std::string Utf8Stream::flush() {
  std::string out;
  decode(held_, out, /*final=*/true);
  held_.clear();
  return out;
}

std::string valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  decode(bytes, out, /*final=*/true);
  return out;
}

}  // namespace sparkglm
