#include "engine/server/sse_stream.h"

#include "engine/server/api_error.h"

namespace sparkglm::server {

std::string sse_event(const nlohmann::json& data) {
  // A JSON dump holds no raw newline, so one `data:` line carries the whole event.
  return "data: " + data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

void SseStream::begin() {
  if (begun_) return;
  begun_ = true;
  exchange_->begin_stream(200, "text/event-stream; charset=utf-8");
}

void SseStream::send(const nlohmann::json& data) {
  gathered_ += sse_event(data);
}

void SseStream::send_error(const ApiError& e) {
  gathered_ += sse_event(e.to_json());
}

void SseStream::flush() {
  if (gathered_.empty()) return;
  std::string bytes;
  bytes.swap(gathered_);
  exchange_->write(std::move(bytes));
}

void SseStream::done() {
  gathered_ += sse_done();
  flush();
  exchange_->end_stream();
}

}  // namespace sparkglm::server
