#pragma once
// One client connection of the HTTP server: reads requests one after another (header and body
// under their timeouts and limits), hands each to the HttpHandler, writes the answers in order, and
// keeps reading while a request runs so that a client who leaves is noticed at once. Everything a
// connection does happens on its own strand.
//
// Boost 1.74's asio headers use std::exchange without including <utility>; it must come first.
#include <utility>

#include <boost/asio/ip/tcp.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/server/http_exchange.h"
#include "engine/server/http_server.h"

namespace sparkglm::server {

class HttpConnection;
class Metrics;

// What the listener shares with its connections; it outlives every one of them.
struct ListenerState {
  ListenerState(const HttpServerOptions& o, HttpHandler& h, Metrics* m)
      : options(o), handler(h), metrics(m) {}

  HttpServerOptions options;
  HttpHandler& handler;
  Metrics* metrics;
  std::atomic<bool> draining{false};
  std::atomic<int> open{0};       // connections counted against max_connections
  std::atomic<int> rejecting{0};  // connections being answered 503
  std::mutex mutex;               // guards `connections`
  std::unordered_map<const HttpConnection*, std::weak_ptr<HttpConnection>> connections;
};

class HttpConnection {
 public:
  virtual ~HttpConnection() = default;

  // Registers a connection for `socket` with `listener` and starts reading requests; with
  // `reject` (the listener is full) it answers 503 instead and closes. The caller has already
  // counted it in listener.open (or listener.rejecting).
  static void serve(boost::asio::ip::tcp::socket socket, ListenerState& listener, bool reject);

  // Shutdown: closes the connection unless a request is in progress.
  virtual void close_if_idle() = 0;
};

}  // namespace sparkglm::server
