#pragma once
// One HTTP(S) GET through libcurl with the limits a tool that reads untrusted servers needs:
// http and https only (redirects too), a redirect limit, a body size limit, a total timeout, and
// TLS peer and host verification left on.
#include <cstddef>
#include <string>

namespace sparkglm::operator_tool {

struct HttpLimits {
  size_t max_bytes = size_t(1) << 20;  // a larger body is an error, not truncated
  double timeout_s = 30.0;
  long max_redirects = 5;
};

struct HttpResult {
  long status = 0;
  std::string body;
  std::string content_type;  // "" when the server sent none
  std::string final_url;     // after redirects
};

bool is_http_url(const std::string& text);  // http:// or https://, any case

// Throws Error(kIo, "<url>: <what went wrong>") when no response came back (unreachable host,
// refused connection, timeout, TLS failure, too many redirects) or the body is over the limit. An
// HTTP error status is returned, not thrown: the caller words it. A `bearer` token is sent as
// "Authorization: Bearer ..." and redirects are then not followed.
HttpResult http_get(const std::string& url, const HttpLimits& limits,
                    const std::string& bearer = "");

}  // namespace sparkglm::operator_tool
