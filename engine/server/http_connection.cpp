#include "engine/server/http_connection.h"

// Boost 1.74's asio headers use std::exchange without including <utility>; it must come first.
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "engine/server/api_error.h"
#include "engine/server/http_framing.h"
#include "engine/server/metrics.h"
#include "engine/server/server_log.h"

namespace sparkglm::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr size_t kReadChunk = 4096;
// While a request runs the connection keeps reading, to notice a disconnect; pipelined bytes
// beyond this are left in the socket.
constexpr size_t kMaxPipelinedBytes = 64u << 10;
// When reading cannot tell whether the client is still there (its pipelined bytes fill the buffer,
// or it has sent its FIN), the socket's state is looked at this often while a request runs.
constexpr std::chrono::milliseconds kPeerCheckInterval{100};
// After the last response of a connection, its unread input is drained this long (so that closing
// does not reset the connection before the client has read the response).
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr size_t kLingerBytes = 1u << 20;

std::string head(int status, const std::string& content_type, bool keep_alive,
                 const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) + "\r\n";
  h += "Server: sparkglm\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  return h;
}

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

// One client connection: reads requests one after another and writes their answers in order. Its
// state is touched on its strand, except the output: a stream's chunks may be written from any
// thread (write_now, the engine thread's direct path), so the bytes queued, the write in flight and
// the fields that say whether the exchange is still open are guarded by out_mutex_. The strand is
// the only writer of those fields (under the lock) and reads them without it.
class Connection final : public HttpConnection, public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, ListenerState& server, bool counted)
      : server_(server),
        stream_(std::move(socket)),
        counted_(counted),
        peer_timer_(stream_.get_executor()) {
    beast::error_code ec;
    const tcp::endpoint ep = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
    stream_.socket().set_option(tcp::no_delay(true), ec);
    if (server_.metrics && counted_) server_.metrics->connection_opened();
  }

  ~Connection() override { release(); }

  void start() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->wait_for_request(self->server_.options.header_timeout);
    });
  }

  void reject() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->reply_and_close(ApiError::too_many_connections(self->server_.options.max_connections));
    });
  }

  void close_if_idle() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->in_exchange_) self->close();
    });
  }

  // The exchange's operations, valid while `id` is the current exchange.
  bool current(uint64_t id) const { return id == exchange_id_ && exchange_open_ && !closed_; }
  bool current_from_any_thread(uint64_t id) {
    std::lock_guard<std::mutex> lock(out_mutex_);
    return current(id);
  }
  void post(std::function<void()> fn) { net::post(stream_.get_executor(), std::move(fn)); }
  // Runs `fn` now when called on the strand, else posts it there.
  void dispatch(std::function<void()> fn) { net::dispatch(stream_.get_executor(), std::move(fn)); }
  void post_at(std::chrono::steady_clock::time_point when, std::function<void()> fn) {
    auto timer = std::make_shared<net::steady_timer>(stream_.get_executor(), when);
    timer->async_wait([timer, fn = std::move(fn)](beast::error_code) { fn(); });
  }

  void respond(HttpResponse r) {
    status_ = r.status;
    std::string out = head(r.status, r.content_type, keep_alive(), r.headers);
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
    out += r.body;
    end_exchange(std::move(out));
  }

  void begin_stream(int status, const std::string& content_type) {
    if (streaming_) return;
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      streaming_ = true;
    }
    status_ = status;
    // HTTP/1.0 has no chunked encoding: the body then ends when the connection closes.
    if (http10_) keep_alive_ = false;
    std::string out = head(status, content_type, keep_alive(),
                           {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
    out += http10_ ? "\r\n" : "Transfer-Encoding: chunked\r\n\r\n";
    queue(std::move(out));
  }

  // Any thread: one chunk of exchange `id`'s stream. With nothing queued ahead of it, it is sent
  // from the calling thread at once by a non-blocking send; what the socket does not take (or
  // what must wait for a write in flight) is queued for the strand. Never blocks on the client.
  void write_now(uint64_t id, const std::string& bytes) {
    if (bytes.empty()) return;
    std::unique_lock<std::mutex> lock(out_mutex_);
    if (!current(id)) return;
    if (http10_) {
      pending_ += bytes;  // no chunked encoding: the body ends when the connection closes
    } else {
      // Framed in place: no temporary string per chunk.
      char size[24];
      const int n = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
      pending_.append(size, size_t(n));
      pending_ += bytes;
      pending_ += "\r\n";
    }
    if (!send_now_locked()) {
      lock.unlock();
      return post([self = shared_from_this()] { self->close(); });  // the client is gone
    }
    if (pending_.empty()) return;
    const bool overflow = pending_.size() + sending_.size() > server_.options.max_queued_bytes;
    lock.unlock();
    // The strand writes the rest once the socket can take it (or finds it already written).
    post([self = shared_from_this(), overflow] {
      if (overflow) return self->close_unread();
      self->write_pending();
    });
  }

  void end_stream() { end_exchange(http10_ ? "" : "0\r\n\r\n"); }

  void set_on_abandon(std::function<void()> fn) { on_abandon_ = std::move(fn); }

 private:
  enum class AfterWatch { kKeepWatching, kNextRequest, kLinger };

  // No keep-alive once the client has sent its FIN and left nothing more to serve.
  bool keep_alive() const {
    return keep_alive_ && !server_.draining.load() && !(input_closed_ && buffer_.size() == 0);
  }

  // Waits for the first byte of the next request, then reads its header.
  void wait_for_request(std::chrono::milliseconds timeout) {
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

  void read_header() {
    parser_.emplace();
    parser_->header_limit(uint32_t(server_.options.max_header_bytes));
    parser_->body_limit(uint64_t(server_.options.max_body_bytes));
    stream_.expires_after(server_.options.header_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec == http::error::header_limit)
      return reply_and_close(ApiError(431, "invalid_request_error", "header_too_large",
                                      "the request header is larger than " +
                                          std::to_string(server_.options.max_header_bytes) +
                                          " bytes"));
    if (ec == http::error::body_limit)  // a Content-Length beyond the limit
      return reply_and_close(ApiError::body_too_large(server_.options.max_body_bytes));
    if (malformed(ec))
      return reply_and_close(ApiError::invalid_request("malformed HTTP request: " + ec.message()));
    if (ec) return close();  // timeout, reset or end of stream
    const auto& req = parser_->get();
    if (const std::string problem = framing_problem(framing_of(req)); !problem.empty())
      return reply_and_close(ApiError::invalid_request("malformed HTTP request: " + problem));
    if (beast::iequals(req[http::field::expect], "100-continue"))
      queue("HTTP/1.1 100 Continue\r\n\r\n");
    if (parser_->is_done()) return on_request();
    stream_.expires_after(server_.options.header_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code e, size_t) { self->on_body(e); });
  }

  void on_body(beast::error_code ec) {
    if (ec == http::error::body_limit)
      return reply_and_close(ApiError::body_too_large(server_.options.max_body_bytes));
    if (malformed(ec))
      return reply_and_close(ApiError::invalid_request("malformed HTTP request: " + ec.message()));
    if (ec) return close();
    on_request();
  }

  void on_request();

  // Answers outside any route (a malformed or oversized request, too many connections) and
  // closes once the answer is written.
  void reply_and_close(const ApiError& e) {
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

  void end_exchange(std::string last) {
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      exchange_open_ = false;
    }
    on_abandon_ = nullptr;
    if (server_.metrics && status_ != 0) server_.metrics->record_response(path_, status_);
    queue(std::move(last));
  }

  void queue(const std::string& bytes) {
    if (closed_) return;
    bool sent;
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      pending_ += bytes;
      sent = send_now_locked();
    }
    if (!sent) return close();
    after_queued();
  }

  // Under out_mutex_: unless a write is in flight, sends what is queued from this thread at once
  // (non-blocking); the strand's write_pending() takes what the socket did not. False when the
  // socket failed: the client is gone.
  bool send_now_locked() {
    if (writing_ || closed_ || pending_.empty()) return true;
    const ssize_t sent = ::send(stream_.socket().native_handle(), pending_.data(), pending_.size(),
                                MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent > 0) pending_.erase(0, size_t(sent));
    return sent >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }

  void after_queued() {
    // A stream's backlog grows while its client does not read; a whole answer is as large as
    // the route made it (bounded by the request limits) and has the write timeout to go out.
    bool overflow;
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      overflow = streaming_ && pending_.size() + sending_.size() > server_.options.max_queued_bytes;
    }
    if (overflow) return close_unread();
    write_pending();
  }

  // The client does not read what it asked for; it is treated as gone.
  void close_unread() {
    if (closed_) return;
    log_line("closing " + peer_ + ": it left more than " +
             std::to_string(server_.options.max_queued_bytes) + " bytes unread");
    close();
  }

  void write_pending() {
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      if (writing_ || closed_) return;
      if (!pending_.empty()) {
        writing_ = true;
        sending_.swap(pending_);
        pending_.clear();
      }
    }
    if (!writing_) {
      if (in_exchange_ && !exchange_open_) finish_exchange();  // an answer that ended on nothing
      return;
    }
    stream_.expires_after(server_.options.write_timeout);
    net::async_write(stream_, net::buffer(sending_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       {
                         std::lock_guard<std::mutex> lock(self->out_mutex_);
                         self->writing_ = false;
                         self->sending_.clear();
                       }
                       if (ec) return self->close();
                       self->write_pending();
                     });
  }

  // The answer is fully written: the next request, or the end of the connection.
  void finish_exchange() {
    in_exchange_ = false;
    {
      std::lock_guard<std::mutex> lock(out_mutex_);
      streaming_ = false;
    }
    peer_timer_.cancel();
    if (!keep_alive()) return linger(false);
    if (watching_) {
      after_watch_ = AfterWatch::kNextRequest;
      beast::error_code ec;
      stream_.socket().cancel(ec);
      return;
    }
    wait_for_request(server_.options.idle_timeout);
  }

  // Reads while a request runs so that a disconnect is noticed at once. With the buffer full of
  // pipelined bytes, or the client's input ended, reading tells nothing more: check_peer() takes
  // over.
  void watch() {
    if (watching_ || closed_ || input_closed_) return;
    if (buffer_.size() >= kMaxPipelinedBytes) return check_peer();
    watching_ = true;
    after_watch_ = AfterWatch::kKeepWatching;
    stream_.expires_never();
    stream_.async_read_some(
        buffer_.prepare(kReadChunk),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(beast::error_code ec, size_t n) {
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

  // Looks at the socket every kPeerCheckInterval while the request runs. A FIN alone cannot tell
  // a client that closed from one that half-closed and waits for its answer; a byte sent can: a
  // closed socket answers it with a reset. So after a FIN the connection sends one harmless probe
  // (an interim "100 Continue" before the answer's head, which HTTP/1.1 clients must accept, or
  // an SSE comment line in a stream), and a reset or error seen afterwards abandons the request.
  void check_peer() {
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

  void probe() {
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

  // Half-closes and discards input for a moment, then closes.
  void linger(bool watched) {
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

  void drain() {
    stream_.async_read_some(net::buffer(discard_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kLingerBytes) return self->close();
                              self->drain();
                            });
  }

  // Gives back the connection's place under max_connections.
  void release() {
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

  void close() {
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

  ListenerState& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string peer_;
  bool counted_;
  std::mutex out_mutex_;  // guards the output (see the class comment)
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
  net::steady_timer peer_timer_;
  bool peer_check_armed_ = false;
  bool input_closed_ = false;  // the client's FIN was read
  bool probed_ = false;        // this exchange sent its probe
  AfterWatch after_watch_ = AfterWatch::kKeepWatching;
  std::array<char, kReadChunk> discard_{};
  size_t drained_ = 0;
};

namespace {

// The route's view of one exchange. write() sends from the calling thread; the other operations
// run at once on the strand and are posted there from any other thread, in the order called (a
// stream's end is queued after the chunks written before it).
class ConnectionExchange : public HttpExchange {
 public:
  ConnectionExchange(std::shared_ptr<Connection> c, uint64_t id) : c_(std::move(c)), id_(id) {}

  void post(std::function<void()> fn) override { c_->post(std::move(fn)); }
  void post_at(std::chrono::steady_clock::time_point when, std::function<void()> fn) override {
    c_->post_at(when, std::move(fn));
  }
  void respond(HttpResponse response) override {
    c_->dispatch([c = c_, id = id_, r = std::move(response)]() mutable {
      if (c->current(id)) c->respond(std::move(r));
    });
  }
  void begin_stream(int status, const std::string& content_type) override {
    c_->dispatch([c = c_, id = id_, status, content_type] {
      if (c->current(id)) c->begin_stream(status, content_type);
    });
  }
  void write(std::string bytes) override { c_->write_now(id_, bytes); }
  void end_stream() override {
    c_->dispatch([c = c_, id = id_] {
      if (c->current(id)) c->end_stream();
    });
  }
  void on_abandon(std::function<void()> fn) override {
    c_->dispatch([c = c_, id = id_, fn = std::move(fn)]() mutable {
      if (c->current(id)) c->set_on_abandon(std::move(fn));
    });
  }
  bool open() const override { return c_->current_from_any_thread(id_); }

 private:
  std::shared_ptr<Connection> c_;
  uint64_t id_;
};

}  // namespace

void Connection::on_request() {
  auto& req = parser_->get();
  HttpRequest r;
  r.method = std::string(req.method_string());
  r.path = std::string(req.target());
  if (auto q = r.path.find('?'); q != std::string::npos) r.path.resize(q);
  r.authorization = std::string(req[http::field::authorization]);
  r.body = std::move(req.body());
  r.peer = peer_;
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
