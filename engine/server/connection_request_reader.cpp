// How a connection reads its requests: it waits for the first byte, reads the header and then the
// body under their timeouts and limits, refuses a malformed, oversized or ambiguously framed
// request with an answer of its own, and hands a complete one to the route as an exchange.
#include "engine/server/connection.h"

// Boost 1.74's asio headers use std::exchange without including <utility>; it must come first.
#include <utility>

#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/server/api_error.h"
#include "engine/server/connection_exchange.h"
#include "engine/server/http_framing.h"
#include "engine/server/server_log.h"

namespace sparkglm::server {

namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// A parse error of the request itself (worth a 400), as opposed to the client going away.
bool malformed(const beast::error_code& ec) {
  // Held by value: a reference to the category of a temporary error_code makes g++ 13 warn
  // (-Wdangling-reference), though the category itself is a static object.
  static const beast::error_code http_error = http::error::bad_method;
  return ec && ec.category() == http_error.category() && ec != http::error::end_of_stream &&
         ec != http::error::partial_message;
}

RequestFraming framing_of(const http::request<http::string_body>& req) {
  RequestFraming f;
  f.version = req.version() < 11 ? 10 : 11;
  for (auto [it, end] = req.equal_range(http::field::content_length); it != end; ++it)
    f.content_length.emplace_back(it->value().data(), it->value().size());
  for (auto [it, end] = req.equal_range(http::field::transfer_encoding); it != end; ++it)
    f.transfer_encoding.emplace_back(it->value().data(), it->value().size());
  return f;
}

}  // namespace

void Connection::wait_for_request(std::chrono::milliseconds timeout) {
  if (closed_) return;
  if (server_.draining.load()) return close();
  if (buffer_.size() > 0) return read_header();
  if (input_closed_) return close();  // the client sent everything it will and has its answers
  stream_.expires_after(timeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->buffer_.commit(n);
                            if (ec) return self->close();
                            self->read_header();
                          });
}

void Connection::read_header() {
  parser_.emplace();
  parser_->header_limit(uint32_t(server_.options.max_header_bytes));
  parser_->body_limit(uint64_t(server_.options.max_body_bytes));
  stream_.expires_after(server_.options.header_timeout);
  http::async_read_header(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Connection::on_header(beast::error_code ec) {
  if (ec == http::error::header_limit)
    return reply_and_close(ApiError(431, "invalid_request_error", "header_too_large",
                                    "the request header is larger than " +
                                        std::to_string(server_.options.max_header_bytes) +
                                        " bytes"));
  if (ec == http::error::body_limit)  // a Content-Length beyond the limit
    return reply_and_close(ApiError::body_too_large(server_.options.max_body_bytes));
  if (malformed(ec))
    return reply_and_close(ApiError::invalid_request("malformed HTTP request: " + ec.message()));
  if (ec == http::error::partial_message)  // a FIN inside the header: see on_body
    return reply_and_close(ApiError::invalid_request(
        "malformed HTTP request: the header ended before its closing blank line"));
  if (ec) return close();  // timeout, reset or end of stream
  const auto& req = parser_->get();
  if (const std::string problem = framing_problem(framing_of(req)); !problem.empty())
    return reply_and_close(ApiError::invalid_request("malformed HTTP request: " + problem));
  if (beast::iequals(req[http::field::expect], "100-continue"))
    queue("HTTP/1.1 100 Continue\r\n\r\n");
  if (parser_->is_done()) return on_request();
  stream_.expires_after(server_.options.header_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code e, size_t) { self->on_body(e); });
}

void Connection::on_body(beast::error_code ec) {
  if (ec == http::error::body_limit)
    return reply_and_close(ApiError::body_too_large(server_.options.max_body_bytes));
  if (ec == http::error::buffer_overflow)  // the read buffer's cap (max_read_buffer_bytes)
    return reply_and_close(ApiError::invalid_request(
        "malformed HTTP request: a chunk size line or trailer is longer than " +
        std::to_string(server_.options.max_header_bytes) + " bytes"));
  // The client ended its input (a FIN) inside the body. It may have only half-closed and still
  // read, as a client that half-closes after a whole request does: it is told why, not dropped.
  if (ec == http::error::partial_message) {
    const auto& req = parser_->get();
    const auto declared = parser_->content_length();
    return reply_and_close(ApiError::invalid_request(
        "malformed HTTP request: the body ended after " + std::to_string(req.body().size()) +
        " bytes" +
        (declared ? " of the " + std::to_string(*declared) + " its Content-Length declares"
                  : ", before its last chunk")));
  }
  if (malformed(ec))
    return reply_and_close(ApiError::invalid_request("malformed HTTP request: " + ec.message()));
  if (ec) return close();
  on_request();
}

void Connection::on_request() {
  auto& req = parser_->get();
  HttpRequest r;
  r.method = std::string(req.method_string());
  r.path = std::string(req.target());
  if (auto q = r.path.find('?'); q != std::string::npos) r.path.resize(q);
  r.authorization = std::string(req[http::field::authorization]);
  r.body = std::move(req.body());
  r.peer = peer_;
  std::vector<std::string_view> content_encoding;
  for (auto [it, end] = req.equal_range(http::field::content_encoding); it != end; ++it)
    content_encoding.emplace_back(it->value().data(), it->value().size());
  const std::string coding = unsupported_content_coding(content_encoding);
  keep_alive_ = req.keep_alive();
  {
    std::lock_guard<std::mutex> lock(out_mutex_);
    http10_ = req.version() < 11;
  }
  parser_.reset();

  {
    std::lock_guard<std::mutex> lock(out_mutex_);
    ++exchange_id_;
    exchange_open_ = true;
    streaming_ = false;
  }
  in_exchange_ = true;
  probed_ = false;
  status_ = 0;
  path_ = r.path;
  if (input_closed_)
    check_peer();
  else
    watch();
  auto exchange = std::make_shared<ConnectionExchange>(shared_from_this(), exchange_id_);
  if (!coding.empty()) {  // the whole body was read: the connection stays usable
    HttpResponse refused = HttpResponse::error(ApiError::unsupported_content_encoding(coding));
    refused.headers.emplace_back("Accept-Encoding", "identity");  // RFC 9110 section 15.5.16
    return exchange->respond(std::move(refused));
  }
  try {
    server_.handler.handle(std::move(r), exchange);
  } catch (const ApiError& e) {
    if (exchange->open() && !streaming_) exchange->respond(HttpResponse::error(e));
    if (exchange->open()) exchange->end_stream();
  } catch (const std::exception& e) {
    log_line(std::string("internal error: ") + e.what());
    if (exchange->open() && !streaming_)
      exchange->respond(HttpResponse::error(ApiError::internal(e.what())));
    if (exchange->open()) exchange->end_stream();
  }
}

void Connection::reply_and_close(const ApiError& e) {
  keep_alive_ = false;
  in_exchange_ = true;
  {
    std::lock_guard<std::mutex> lock(out_mutex_);
    exchange_open_ = true;
    ++exchange_id_;
  }
  path_ = parser_ ? std::string(parser_->get().target()) : "";
  if (auto q = path_.find('?'); q != std::string::npos) path_.resize(q);
  respond(HttpResponse::error(e));
}

}  // namespace sparkglm::server
