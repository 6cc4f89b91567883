#include "engine/server/http_framing.h"

#include <algorithm>
#include <cctype>

namespace sparkglm::server {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool equals_lower(std::string_view s, std::string_view lower) {
  return s.size() == lower.size() &&
         std::equal(s.begin(), s.end(), lower.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

// The codings of every Transfer-Encoding (or Content-Encoding) field, in order (a comma list
// across fields).
std::vector<std::string_view> codings(const std::vector<std::string_view>& fields) {
  std::vector<std::string_view> out;
  for (std::string_view f : fields) {
    for (;;) {
      const size_t comma = f.find(',');
      out.push_back(trim(f.substr(0, comma)));
      if (comma == std::string_view::npos) break;
      f.remove_prefix(comma + 1);
    }
  }
  return out;
}

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 64)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  return out + (s.size() > 64 ? "...\"" : "\"");
}

}  // namespace

std::string framing_problem(const RequestFraming& framing) {
  if (!framing.transfer_encoding.empty()) {
    if (framing.version < 11) return "Transfer-Encoding is not allowed in an HTTP/1.0 request";
    if (!framing.content_length.empty())
      return "a request may not have both Transfer-Encoding and Content-Length";
    const auto list = codings(framing.transfer_encoding);
    if (list.size() != 1 || !equals_lower(list[0], "chunked")) {
      std::string all;
      for (std::string_view f : framing.transfer_encoding)
        all += (all.empty() ? "" : ", ") + std::string(f);
      return "Transfer-Encoding " + quoted(all) +
             " is not supported; the only transfer coding accepted is \"chunked\" alone";
    }
    return "";
  }
  if (framing.content_length.size() > 1) return "Content-Length is given more than once";
  if (framing.content_length.size() == 1) {
    const std::string_view v = trim(framing.content_length[0]);
    if (v.empty() || v.size() > 19 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return "Content-Length " + quoted(framing.content_length[0]) + " is not one decimal number";
  }
  return "";
}

std::string unsupported_content_coding(const std::vector<std::string_view>& content_encoding) {
  for (std::string_view coding : codings(content_encoding))
    if (!coding.empty() && !equals_lower(coding, "identity")) return std::string(coding);
  return "";
}

}  // namespace sparkglm::server
