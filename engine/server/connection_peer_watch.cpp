// How a connection notices a client that leaves while its request runs: it keeps reading (pipelined
// bytes up to kMaxPipelinedBytes wait in the buffer), and when reading can tell no more it looks at
// the socket's state and sends one harmless probe after a FIN. And how it ends politely: after the
// last answer it half-closes and drains the client's input for a moment before closing.
#include "engine/server/connection.h"

// Boost 1.74's asio headers use std::exchange without including <utility>; it must come first.
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>

#include <poll.h>

#include <chrono>
#include <cstddef>

namespace sparkglm::server {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

// When reading cannot tell whether the client is still there (its pipelined bytes fill the buffer,
// or it has sent its FIN), the socket's state is looked at this often while a request runs.
constexpr std::chrono::milliseconds kPeerCheckInterval{100};
// After the last response of a connection, its unread input is drained this long (so that closing
// does not reset the connection before the client has read the response).
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr size_t kLingerBytes = 1u << 20;

}  // namespace

void Connection::watch() {
  if (watching_ || closed_ || input_closed_) return;
  if (buffer_.size() >= kMaxPipelinedBytes) return check_peer();
  watching_ = true;
  after_watch_ = AfterWatch::kKeepWatching;
  stream_.expires_never();
  stream_.async_read_some(
      buffer_.prepare(kReadChunk),
      [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
}

void Connection::on_watch(beast::error_code ec, size_t n) {
  watching_ = false;
  buffer_.commit(n);
  switch (after_watch_) {
    case AfterWatch::kNextRequest:
      // An answer written at once (a direct send) ends its exchange before this read returns:
      // what the read saw still counts. A FIN seen here is never seen again (the socket gives no
      // second edge), so it is kept.
      if (ec == net::error::eof) input_closed_ = true;
      if (ec && ec != net::error::eof && ec != net::error::operation_aborted) return close();
      return wait_for_request(server_.options.idle_timeout);
    case AfterWatch::kLinger:
      return linger(true);
    case AfterWatch::kKeepWatching:
      if (ec == net::error::eof) {
        // A FIN: the client closed, or only half-closed (shutdown(SHUT_WR)) and still reads.
        input_closed_ = true;
        if (in_exchange_) check_peer();
        return;
      }
      if (ec) return close();  // reset: the client went away
      if (in_exchange_) return watch();
      return;
  }
}

void Connection::check_peer() {
  if (closed_ || !in_exchange_ || peer_check_armed_) return;
  peer_check_armed_ = true;
  peer_timer_.expires_after(kPeerCheckInterval);
  peer_timer_.async_wait([self = shared_from_this()](beast::error_code) {
    self->peer_check_armed_ = false;
    if (self->closed_ || !self->in_exchange_) return;
    pollfd p{self->stream_.socket().native_handle(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) < 0) return self->check_peer();
    if (p.revents & (POLLERR | POLLHUP)) return self->close();  // reset: the client is gone
    if ((p.revents & POLLRDHUP) && !self->probed_) self->probe();
    // While the buffer holds pipelined bytes, the client may yet be read from.
    if (!self->input_closed_ && self->buffer_.size() < kMaxPipelinedBytes) return self->watch();
    self->check_peer();
  });
}

void Connection::probe() {
  if (!exchange_open_) return;
  if (streaming_) {
    probed_ = true;
    return write_now(exchange_id_, ":\n");
  }
  if (status_ == 0 && !http10_) {
    probed_ = true;
    queue("HTTP/1.1 100 Continue\r\n\r\n");
  }
}

void Connection::linger(bool watched) {
  if (closed_) return;
  if (!watched && watching_) {
    after_watch_ = AfterWatch::kLinger;
    beast::error_code ec;
    stream_.socket().cancel(ec);
    return;
  }
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.expires_after(kLingerTime);
  drain();
}

void Connection::drain() {
  stream_.async_read_some(net::buffer(discard_),
                          [self = shared_from_this()](beast::error_code ec, size_t n) {
                            self->drained_ += n;
                            if (ec || self->drained_ > kLingerBytes) return self->close();
                            self->drain();
                          });
}

}  // namespace sparkglm::server
