#pragma once
// The HTTP/1.1 listener: a few I/O threads, one strand per connection, and the limits that keep a
// long-running server bounded: connections, body size, header, body, idle and write timeouts.
// Requests go to an HttpHandler; responses are written in order, streams as chunked bodies.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/server/http_exchange.h"

namespace sparkglm::server {

class Metrics;

struct HttpServerOptions {
  std::string bind = "127.0.0.1";
  int port = 8893;     // 0 picks a free port (see HttpServer::port)
  int io_threads = 1;  // one keeps strand hops free of wake-ups; more for many busy connections
  int max_connections = 256;         // beyond it a client gets 503 and the connection is closed
  size_t max_body_bytes = 8u << 20;  // beyond it 413
  size_t max_header_bytes = 16u << 10;
  // A slow client holds a connection at most this long per phase, never a thread.
  std::chrono::milliseconds header_timeout{10000};  // first byte to end of header; also the body
  std::chrono::milliseconds idle_timeout{60000};    // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{30000};   // one write to a client that stops reading
  size_t max_queued_bytes = 16u << 20;  // unsent output beyond this: the client is too slow
};

class HttpServer {
 public:
  HttpServer(const HttpServerOptions& options, HttpHandler& handler, Metrics* metrics);
  ~HttpServer();  // stops the I/O threads; connections still open are closed
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens (Error(kIo) naming the address when it cannot), then starts the threads.
  void start();
  uint16_t port() const;  // the bound port

  // Graceful shutdown, first half: closes the listener and idle connections; requests in
  // progress finish, and their connections close after the response.
  void stop_accepting();
  bool draining() const;
  // Waits until no connection is open or `timeout` passes; true when none is left.
  bool wait_until_closed(std::chrono::milliseconds timeout);
  // Second half: stops the I/O threads (open connections are dropped).
  void stop();

  int open_connections() const;

  // Runs the I/O handlers that are ready now on the calling thread, next to the I/O threads (each
  // connection's strand still runs one handler at a time). The engine thread calls it after each
  // step: what its events posted (a stream's end, a body's drain, a flush-interval stream's
  // drain) then runs on the thread that holds a core instead of waiting for an I/O thread to be
  // scheduled. (A stream's token events do not wait even for this: the engine thread sends them
  // itself, generation_call.h.) Never blocks; a handler that throws is logged.
  void run_ready_handlers();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparkglm::server
