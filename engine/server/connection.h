#pragma once
// The HttpConnection the listener serves: one client connection, which reads requests one after
// another and writes their answers in order. Internal to the server; its methods are defined by
// concern across four files:
//   http_connection.cpp             its life: start, reject, release, close
//   connection_request_reader.cpp   reading a request (header and body under their limits)
//   connection_response_writer.cpp  writing an answer, whole or as a stream, and its end
//   connection_peer_watch.cpp       noticing a client that leaves, and the linger before close
//
// Its state is touched on its strand, except the output: a stream's chunks may be written from any
// thread (write_now, the engine thread's direct path), so the bytes queued, the write in flight and
// the fields that say whether the exchange is still open are guarded by out_mutex_. The strand is
// the only writer of those fields (under the lock) and reads them without it.
//
// Boost 1.74's asio headers use std::exchange without including <utility>; it must come first.
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/server/http_connection.h"
#include "engine/server/http_exchange.h"

namespace sparkglm::server {

class ApiError;

// The size of one read from the socket (a request's first bytes, a watch, the linger's drain).
constexpr size_t kReadChunk = 4096;
// While a request runs the connection keeps reading, to notice a disconnect; pipelined bytes
// beyond this are left in the socket.
constexpr size_t kMaxPipelinedBytes = 64u << 10;
// The most one Beast read adds to the buffer.
constexpr size_t kMaxParserRead = 64u << 10;
// The read buffer holds at most a header (max_header_bytes), the pipelined bytes and one read.
// Beast keeps a chunk's size line and the trailer there whole until their lines end, counted
// against neither the header nor the body limit: this cap is what bounds them.
inline size_t max_read_buffer_bytes(size_t max_header_bytes) {
  return max_header_bytes + kMaxPipelinedBytes + kMaxParserRead;
}

class Connection final : public HttpConnection, public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::ip::tcp::socket socket, ListenerState& server, bool counted);
  ~Connection() override;

  void start();
  void reject();
  void close_if_idle() override;

  // The exchange's operations, valid while `id` is the current exchange.
  bool current(uint64_t id) const { return id == exchange_id_ && exchange_open_ && !closed_; }
  bool current_from_any_thread(uint64_t id) {
    std::lock_guard<std::mutex> lock(out_mutex_);
    return current(id);
  }
  void post(std::function<void()> fn) { boost::asio::post(stream_.get_executor(), std::move(fn)); }
  // Runs `fn` now when called on the strand, else posts it there.
  void dispatch(std::function<void()> fn) {
    boost::asio::dispatch(stream_.get_executor(), std::move(fn));
  }
  void post_at(std::chrono::steady_clock::time_point when, std::function<void()> fn) {
    auto timer = std::make_shared<boost::asio::steady_timer>(stream_.get_executor(), when);
    timer->async_wait([timer, fn = std::move(fn)](boost::beast::error_code) { fn(); });
  }

  void respond(HttpResponse r);
  void begin_stream(int status, const std::string& content_type);
  // Any thread: one chunk of exchange `id`'s stream. With nothing queued ahead of it, it is sent
  // from the calling thread at once by a non-blocking send; what the socket does not take (or
  // what must wait for a write in flight) is queued for the strand. Never blocks on the client.
  void write_now(uint64_t id, const std::string& bytes);
  void end_stream();

  void set_on_abandon(std::function<void()> fn) { on_abandon_ = std::move(fn); }

 private:
  enum class AfterWatch { kKeepWatching, kNextRequest, kLinger };

  // No keep-alive once the client has sent its FIN and left nothing more to serve.
  bool keep_alive() const {
    return keep_alive_ && !server_.draining.load() && !(input_closed_ && buffer_.size() == 0);
  }

  // Reading a request (connection_request_reader.cpp).
  // Waits for the first byte of the next request, then reads its header.
  void wait_for_request(std::chrono::milliseconds timeout);
  void read_header();
  void on_header(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);
  void on_request();
  // Answers outside any route (a malformed or oversized request, too many connections) and
  // closes once the answer is written.
  void reply_and_close(const ApiError& e);

  // Writing the answer (connection_response_writer.cpp).
  void end_exchange(std::string last);
  void queue(const std::string& bytes);
  // Under out_mutex_: unless a write is in flight, sends what is queued from this thread at once
  // (non-blocking); the strand's write_pending() takes what the socket did not. False when the
  // socket failed: the client is gone.
  bool send_now_locked();
  void after_queued();
  // The client does not read what it asked for; it is treated as gone.
  void close_unread();
  void write_pending();
  // The answer is fully written: the next request, or the end of the connection.
  void finish_exchange();

  // Noticing a client that left, and lingering before the close (connection_peer_watch.cpp).
  // Reads while a request runs so that a disconnect is noticed at once. With the buffer full of
  // pipelined bytes, or the client's input ended, reading tells nothing more: check_peer() takes
  // over.
  void watch();
  void on_watch(boost::beast::error_code ec, size_t n);
  // Looks at the socket every kPeerCheckInterval while the request runs. A FIN alone cannot tell
  // a client that closed from one that half-closed and waits for its answer; a byte sent can: a
  // closed socket answers it with a reset. So after a FIN the connection sends one harmless probe
  // (an interim "100 Continue" before the answer's head, which HTTP/1.1 clients must accept, or
  // an SSE comment line in a stream), and a reset or error seen afterwards abandons the request.
  void check_peer();
  void probe();
  // Half-closes and discards input for a moment, then closes.
  void linger(bool watched);
  void drain();

  // The end of the connection (http_connection.cpp).
  // Gives back the connection's place under max_connections.
  void release();
  void close();

  ListenerState& server_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::string peer_;
  bool counted_;
  std::mutex out_mutex_;  // guards the output (see the file comment)
  bool closed_ = false;
  bool released_ = false;
  // The current exchange.
  uint64_t exchange_id_ = 0;
  bool in_exchange_ = false;    // its answer is not fully written yet
  bool exchange_open_ = false;  // the route may still write
  bool streaming_ = false;
  bool keep_alive_ = false;
  bool http10_ = false;
  int status_ = 0;
  std::string path_;
  std::function<void()> on_abandon_;
  // Output: bytes queued, and the bytes of the one write in flight.
  std::string pending_, sending_;
  bool writing_ = false;
  bool watching_ = false;
  // Noticing a client that left while its request runs (see check_peer).
  boost::asio::steady_timer peer_timer_;
  bool peer_check_armed_ = false;
  bool input_closed_ = false;  // the client's FIN was read
  bool probed_ = false;        // this exchange sent its probe
  AfterWatch after_watch_ = AfterWatch::kKeepWatching;
  std::array<char, kReadChunk> discard_{};
  size_t drained_ = 0;
};

}  // namespace sparkglm::server
