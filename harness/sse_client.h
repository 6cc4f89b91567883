#pragma once
// One streaming request, timed as its bytes arrive: the libcurl write callback reads the
// monotonic clock on entry, so every event carries the time its last byte reached the client, not
// the time it was parsed. An output event is one that carries a token (its ids, with
// return_token_ids) or text, so TTFT and the decode window are keyed to tokens, not to visible
// bytes. The client's own time inside the callback is recorded per output event, the load
// thread's whole CPU time per request, and how many events each socket read held, so a reader can
// check the client stays far below the gaps it measures and that the server did not batch events.
#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/request_record.h"
#include "harness/request_spec.h"

namespace sparkglm::harness {

// The body as sent: spec.body with "stream": true, "stream_options": {"include_usage": true} and
// "return_token_ids": true forced (other stream_options keys kept). Throws Error naming `body` when
// it is not a JSON object.
nlohmann::json streaming_body(const nlohmann::json& body);

// Sends spec.body (through streaming_body) to base_url + spec.path and reads the stream to
// `data: [DONE]`. Never throws for a failed request: a connection failure, a timeout
// (spec.timeout_s for the whole request), an HTTP status other than 200 (its body kept in
// `error`), an error event in the stream, a malformed event, or a stream that ends without
// [DONE], a finish reason or the usage chunk gives ok = false with `error` saying which.
// Times are seconds since `epoch`. start_s is read when the connection is up, just before the
// request is sent (libcurl's pre-request callback): each request opens a fresh connection, a
// cost of this client that a server comparison should not carry. Without a connection it is the
// time the transfer began.
RequestRecord stream_request(const std::string& base_url, const RequestSpec& spec,
                             const std::string& arm, std::chrono::steady_clock::time_point epoch);

// stream_request in two steps: the constructor builds the body and the libcurl handle (it never
// throws for a bad spec; perform() then returns the failed record), perform() sends and reads the
// stream, once. The load runner builds every request of a barrier group before releasing it.
class SseRequest {
 public:
  SseRequest(const std::string& base_url, const RequestSpec& spec, const std::string& arm,
             std::chrono::steady_clock::time_point epoch);
  ~SseRequest();
  SseRequest(const SseRequest&) = delete;
  SseRequest& operator=(const SseRequest&) = delete;
  RequestRecord perform();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sparkglm::harness
