#pragma once
// Server-sent events as OpenAI streams them: `data: <json>\n\n` per event, an error as
// `data: {"error": {...}}`, and `data: [DONE]` last, over a chunked HTTP body.
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
  void send(const nlohmann::json& data);  // one event
  void send_error(const ApiError& e);     // an error event (the status is already sent)
  void done();                            // [DONE], then the end of the body
  bool begun() const { return begun_; }

 private:
  std::shared_ptr<HttpExchange> exchange_;
  bool begun_ = false;
};

}  // namespace sparkglm::server
