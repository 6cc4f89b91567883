#pragma once
// Server-sent events as OpenAI streams them: `data: <json>\n\n` per event, an error as
// `data: {"error": {...}}`, and `data: [DONE]` last, over a chunked HTTP body.
//
// Events are gathered and go out in one write at flush(): the events of one engine step (or of
// several, when the client's connection fell behind) cost one HTTP chunk and one system call.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/server/http_exchange.h"

namespace sparkglm::server {

class ApiError;

// The bytes of one event.
std::string sse_event(const nlohmann::json& data);
std::string sse_done();

class SseStream {
 public:
  explicit SseStream(std::shared_ptr<HttpExchange> exchange) : exchange_(std::move(exchange)) {}

  void begin();                           // 200, text/event-stream
  void send(const nlohmann::json& data);  // one event, gathered
  void send_error(const ApiError& e);     // an error event (the status is already sent)
  // Where a caller appends an event it wrote itself (`data: ...\n\n`), gathered like send()'s.
  std::string& gathered() { return gathered_; }
  void flush();  // writes what was gathered
  void done();   // [DONE], then the end of the body
  bool begun() const { return begun_; }

 private:
  std::shared_ptr<HttpExchange> exchange_;
  std::string gathered_;
  bool begun_ = false;
};

}  // namespace sparkglm::server
