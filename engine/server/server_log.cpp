#include "engine/server/server_log.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "engine/text/utf8.h"

namespace sparkglm::server {

namespace {

// Appends the escaped form of `text` to `out` until `out` would pass `max_bytes`; returns how many
// input bytes were consumed. `quoted` (the text goes between double quotes) also escapes the
// backslash and the quote; a whole line leaves them alone, so that a JSON line stays JSON.
size_t append_escaped(std::string& out, std::string_view text, size_t max_bytes, bool quoted) {
  size_t i = 0;
  std::string piece;
  while (i < text.size()) {
    size_t len = 1;
    const char32_t cp = decode_utf8(text, i, len);
    piece.clear();
    if (cp == '\n') {
      piece = "\\n";
    } else if (cp == '\r') {
      piece = "\\r";
    } else if (cp == '\t') {
      piece = "\\t";
    } else if (quoted && (cp == '\\' || cp == '"')) {
      piece = {'\\', char(cp)};
    } else if (cp < 0x20 || cp == 0x7F || cp == kInvalidUtf8Byte) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", unsigned(static_cast<unsigned char>(text[i])));
      piece = hex;
    } else if ((cp >= 0x80 && cp < 0xA0) || cp == 0x2028 || cp == 0x2029) {
      // C1 controls act on terminals (U+009B is CSI); the Unicode line separators split lines
      // for some readers.
      char hex[10];
      std::snprintf(hex, sizeof hex, "\\u%04x", unsigned(cp));
      piece = hex;
    } else {
      piece.assign(text.substr(i, len));
    }
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += len;
  }
  return i;
}

}  // namespace

std::string log_safe(std::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 16);
  const size_t used = append_escaped(out, text, max_bytes, false);
  if (used < text.size()) out += "...[" + std::to_string(text.size() - used) + " bytes cut]";
  return out;
}

std::string client_text(std::string_view text, size_t max_bytes) {
  std::string out = "\"";
  const size_t used = append_escaped(out, text, max_bytes + 1, true);
  out += '"';
  if (used < text.size()) out += "...[" + std::to_string(text.size() - used) + " bytes cut]";
  return out;
}

void log_line(const std::string& text) {
  static std::mutex mutex;
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  const std::string line = log_safe(text, kMaxLogLineBytes);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "%s.%03dZ %s\n", stamp, int(ms), line.c_str());
  std::fflush(stderr);
}

}  // namespace sparkglm::server
