#pragma once
// The route's view of one exchange on a Connection (the HttpExchange a route is handed). Internal
// to the server. write() sends from the calling thread; the other operations run at once on the
// strand and are posted there from any other thread, in the order called (a stream's end is queued
// after the chunks written before it). Every operation checks that its exchange is still the
// connection's current one, so a late call after the end or a disconnect does nothing.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/server/http_exchange.h"

namespace sparkglm::server {

class Connection;

class ConnectionExchange : public HttpExchange {
 public:
  ConnectionExchange(std::shared_ptr<Connection> c, uint64_t id) : c_(std::move(c)), id_(id) {}

  void post(std::function<void()> fn) override;
  void post_at(std::chrono::steady_clock::time_point when, std::function<void()> fn) override;
  void respond(HttpResponse response) override;
  void begin_stream(int status, const std::string& content_type) override;
  void write(std::string bytes) override;
  void end_stream() override;
  void on_abandon(std::function<void()> fn) override;
  bool open() const override;

 private:
  std::shared_ptr<Connection> c_;
  uint64_t id_;
};

}  // namespace sparkglm::server
