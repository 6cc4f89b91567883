// The life of a client connection: HttpConnection::serve registers it with the listener and starts
// it (or has it answer 503); close() ends it, gives back its place under max_connections and runs
// the route's abandon hook when a request was still in progress. Reading, writing and watching the
// client live in the files connection.h names.
#include "engine/server/http_connection.h"

// Boost 1.74's asio headers use std::exchange without including <utility>; it must come first.
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>

#include <memory>
#include <mutex>
#include <string>

#include "engine/server/api_error.h"
#include "engine/server/connection.h"
#include "engine/server/metrics.h"

namespace sparkglm::server {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

Connection::Connection(tcp::socket socket, ListenerState& server, bool counted)
    : server_(server),
      stream_(std::move(socket)),
      buffer_(max_read_buffer_bytes(server.options.max_header_bytes)),
      counted_(counted),
      peer_timer_(stream_.get_executor()) {
  beast::error_code ec;
  const tcp::endpoint ep = stream_.socket().remote_endpoint(ec);
  if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  stream_.socket().set_option(tcp::no_delay(true), ec);
  if (server_.metrics && counted_) server_.metrics->connection_opened();
}

Connection::~Connection() {
  release();
}

void Connection::start() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->wait_for_request(self->server_.options.header_timeout);
  });
}

void Connection::reject() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    self->reply_and_close(ApiError::too_many_connections(self->server_.options.max_connections));
  });
}

void Connection::close_if_idle() {
  net::post(stream_.get_executor(), [self = shared_from_this()] {
    if (!self->in_exchange_) self->close();
  });
}

void Connection::release() {
  if (released_) return;
  released_ = true;
  {
    std::lock_guard<std::mutex> lock(server_.mutex);
    server_.connections.erase(static_cast<HttpConnection*>(this));
  }
  if (counted_) {
    server_.open.fetch_sub(1);
    if (server_.metrics) server_.metrics->connection_closed();
  } else {
    server_.rejecting.fetch_sub(1);
  }
}

void Connection::close() {
  if (closed_) return;
  bool abandoned;
  {
    // After this no other thread sends on the socket (write_now checks closed_ under the lock).
    std::lock_guard<std::mutex> lock(out_mutex_);
    closed_ = true;
    abandoned = in_exchange_ && exchange_open_;
    exchange_open_ = false;
  }
  peer_timer_.cancel();
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
  release();
  auto fn = std::move(on_abandon_);
  on_abandon_ = nullptr;
  if (abandoned && server_.metrics) server_.metrics->record_response(path_, 499);
  // Posted, not called: close() can run inside a route's own call (a failed write), and the
  // route may hold its lock there.
  if (abandoned && fn) post(std::move(fn));
}

void HttpConnection::serve(tcp::socket socket, ListenerState& listener, bool reject) {
  auto c = std::make_shared<Connection>(std::move(socket), listener, !reject);
  {
    std::lock_guard<std::mutex> lock(listener.mutex);
    listener.connections.emplace(c.get(), c);
  }
  if (reject)
    c->reject();
  else
    c->start();
}

}  // namespace sparkglm::server
