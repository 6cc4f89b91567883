// How a connection writes its answers: a whole response or a stream's head, chunks and end, queued
// in order and sent without blocking on the client (the calling thread sends what the socket takes
// at once; the strand writes the rest). A client that leaves more than max_queued_bytes unread is
// treated as gone. Once an answer is fully written the connection reads its next request, or ends.
#include "engine/server/connection.h"

// Boost 1.74's asio headers use std::exchange without including <utility>; it must come first.
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>

#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "engine/server/metrics.h"
#include "engine/server/server_log.h"

namespace sparkglm::server {

namespace net = boost::asio;
namespace beast = boost::beast;

namespace {

std::string head(int status, const std::string& content_type, bool keep_alive,
                 const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) + "\r\n";
  h += "Server: sparkglm\r\n";
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  return h;
}

}  // namespace

void Connection::respond(HttpResponse r) {
  status_ = r.status;
  std::string out = head(r.status, r.content_type, keep_alive(), r.headers);
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
  out += r.body;
  end_exchange(std::move(out));
}

void Connection::begin_stream(int status, const std::string& content_type) {
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

void Connection::write_now(uint64_t id, const std::string& bytes) {
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

void Connection::end_stream() {
  end_exchange(http10_ ? "" : "0\r\n\r\n");
}

void Connection::end_exchange(std::string last) {
  {
    std::lock_guard<std::mutex> lock(out_mutex_);
    exchange_open_ = false;
  }
  on_abandon_ = nullptr;
  if (server_.metrics && status_ != 0) server_.metrics->record_response(path_, status_);
  queue(std::move(last));
}

void Connection::queue(const std::string& bytes) {
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

bool Connection::send_now_locked() {
  if (writing_ || closed_ || pending_.empty()) return true;
  const ssize_t sent = ::send(stream_.socket().native_handle(), pending_.data(), pending_.size(),
                              MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent > 0) pending_.erase(0, size_t(sent));
  return sent >= 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

void Connection::after_queued() {
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

void Connection::close_unread() {
  if (closed_) return;
  log_line("closing " + peer_ + ": it left more than " +
           std::to_string(server_.options.max_queued_bytes) + " bytes unread");
  close();
}

void Connection::write_pending() {
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

void Connection::finish_exchange() {
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

}  // namespace sparkglm::server
