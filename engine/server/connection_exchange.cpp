// ConnectionExchange: each of a route's calls, forwarded to its connection's strand (or, for
// write(), sent from the calling thread) and dropped once the exchange is no longer current.
#include "engine/server/connection_exchange.h"

// Boost 1.74's asio headers use std::exchange without including <utility>; it must come first.
#include <utility>

#include "engine/server/connection.h"

namespace sparkglm::server {

void ConnectionExchange::post(std::function<void()> fn) {
  c_->post(std::move(fn));
}

void ConnectionExchange::post_at(std::chrono::steady_clock::time_point when,
                                 std::function<void()> fn) {
  c_->post_at(when, std::move(fn));
}

void ConnectionExchange::respond(HttpResponse response) {
  c_->dispatch([c = c_, id = id_, r = std::move(response)]() mutable {
    if (c->current(id)) c->respond(std::move(r));
  });
}

void ConnectionExchange::begin_stream(int status, const std::string& content_type) {
  c_->dispatch([c = c_, id = id_, status, content_type] {
    if (c->current(id)) c->begin_stream(status, content_type);
  });
}

void ConnectionExchange::write(std::string bytes) {
  c_->write_now(id_, bytes);
}

void ConnectionExchange::end_stream() {
  c_->dispatch([c = c_, id = id_] {
    if (c->current(id)) c->end_stream();
  });
}

void ConnectionExchange::on_abandon(std::function<void()> fn) {
  c_->dispatch([c = c_, id = id_, fn = std::move(fn)]() mutable {
    if (c->current(id)) c->set_on_abandon(std::move(fn));
  });
}

bool ConnectionExchange::open() const {
  return c_->current_from_any_thread(id_);
}

}  // namespace sparkglm::server
