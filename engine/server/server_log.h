#pragma once
// One line per event on stderr, with a UTC timestamp, written whole even from several threads.
//
// The log is read by people and by tools (`sparkglm status`, harnesses), and some of what it says
// comes from clients (cache_salt, model names, paths). So a line never holds a raw control
// character: newlines, escapes and invalid UTF-8 are written as \n, \x1b..., which keeps a client
// from starting a line of its own; and a line is cut at kMaxLogLineBytes, which keeps one request
// from writing megabytes. Client strings go through client_text() as well, which quotes them and
// cuts them much shorter.
#include <cstddef>
#include <string>
#include <string_view>

namespace sparkglm::server {

inline constexpr size_t kMaxLogLineBytes = 16u << 10;  // the effective config fits several times
inline constexpr size_t kMaxClientTextBytes = 256;

void log_line(const std::string& text);

// `text` with every control character (C0, DEL, C1, U+2028/9) and invalid UTF-8 byte escaped, cut
// after `max_bytes` of escaped output with a note of how many input bytes were left out. A JSON
// text stays valid JSON: its own escapes are kept, and the escape of a C1 control is JSON's own.
std::string log_safe(std::string_view text, size_t max_bytes);

// A client's string for a log line: escaped as log_safe, its backslashes and quotes too, cut at
// `max_bytes`, in double quotes, so that it cannot pass for the fields around it.
std::string client_text(std::string_view text, size_t max_bytes = kMaxClientTextBytes);

}  // namespace sparkglm::server
