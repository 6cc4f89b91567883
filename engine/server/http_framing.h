#pragma once
// How a request's body is delimited (RFC 9112 section 6), checked before the body is read. Beast
// accepts some framings that a proxy in front of the server may read differently (a request
// smuggled past it): "Transfer-Encoding: identity" next to a Content-Length, "xchunked" or
// "chunked, identity" (not chunked, so Beast reads no body and takes the rest for the next
// request), Content-Length repeated or given as a list. The server takes one framing only: no
// Transfer-Encoding and at most one Content-Length of plain digits, or "Transfer-Encoding:
// chunked" alone on HTTP/1.1. Anything else is a 400 and the connection closes.
//
// A body is read as it arrives: one with a content coding (Content-Encoding: gzip, br, ...) would
// be parsed as its compressed bytes, so it is refused with 415 naming the coding instead.
#include <string>
#include <string_view>
#include <vector>

namespace sparkglm::server {

struct RequestFraming {
  int version = 11;                                 // 10 or 11
  std::vector<std::string_view> content_length;     // every Content-Length field's value
  std::vector<std::string_view> transfer_encoding;  // every Transfer-Encoding field's value
};

// "" when the framing is the one accepted; otherwise why not, for the client's 400.
std::string framing_problem(const RequestFraming& framing);

// The first content coding, across every Content-Encoding field's comma list, other than
// "identity" (any case), as given; "" when there is none.
std::string unsupported_content_coding(const std::vector<std::string_view>& content_encoding);

}  // namespace sparkglm::server
