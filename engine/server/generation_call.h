#pragma once
// One chat or text completion in flight: submits the request, turns the engine's token events into
// text (OutputText) and answers the client, as one JSON body or as server-sent events. The engine
// calls back on its own thread, which only appends the event to this call's inbox and, when the
// inbox was empty, posts one drain to the connection's strand; so this object is otherwise only
// touched there, the engine never waits on a client, and the events that piled up while the
// connection was busy go out in one write. (With a flush interval, see GenerationSetup.) The
// strand's handlers run on an I/O thread or, right after each engine step, on the engine thread
// itself (HttpServer::run_ready_handlers), so that a token's event need not wait for the I/O
// thread to get a core; the I/O thread, woken by the post, can still take the drain first and
// lose its core inside it. Each drain records its token events' delay from sampling to write in
// Metrics (sparkglm_sse_emit_delay_seconds), which shows how often that happens.
//
// Endings: eos / stop token -> "stop"; a stop string -> "stop" and the engine request is cancelled
// at once; max_tokens -> "length"; the client gone -> the engine request is cancelled; the deadline
// -> 504 (or an error event mid-stream); server shutdown -> 503 (or an error event); a device
// fault -> 503 device_fault (or an error event, then [DONE]).
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/generation_request.h"
#include "engine/server/generation_engine.h"
#include "engine/server/http_exchange.h"
#include "engine/server/openai_request.h"
#include "engine/server/openai_response.h"
#include "engine/server/output_text.h"
#include "engine/server/sse_stream.h"
#include "engine/server/stream_chunk.h"
#include "engine/server/token_codec.h"

namespace sparkglm::server {

class ApiError;
class Metrics;

enum class ApiKind { kChat, kCompletion };

struct GenerationSetup {
  ApiKind kind = ApiKind::kChat;
  std::string model_id;
  GenerationFields fields;  // fields.sampling.max_tokens is settled
  std::vector<int32_t> prompt;
  bool thinking = false;  // chat: the prompt leaves the reasoning section open
  std::vector<int> eos_ids;
  double request_timeout_s = 0;  // 0: none
  // Streams: 0 = a drain per batch of events, posted by the engine thread (each engine step wakes
  // the connection). Otherwise, while events keep coming, the strand drains once per interval by
  // a timer and the engine thread posts nothing: a step shorter than a thread wake-up then does
  // not pay one per token. The first event after a quiet interval is posted at once. The timers of
  // all streams fire on one grid, so one wake-up serves every connection.
  std::chrono::microseconds flush_interval{0};
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
};

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  GenerationCall(GenerationSetup setup, const TokenCodec& codec, Metrics* metrics,
                 std::shared_ptr<HttpExchange> exchange);

  // On the connection's strand. Throws ApiError when the engine refuses the request (nothing has
  // been sent then); a stream's header and role chunk go out once it is queued.
  void start(GenerationEngine& engine);
  const std::string& id() const { return id_; }

 private:
  // Engine thread: queues `e`; posts drain() unless one is already scheduled.
  void deliver(const RequestEvent& e);
  // Strand: handles every queued event, then writes what they produced at once; with a flush
  // interval, schedules the next drain by timer while the stream runs.
  void drain();
  void drain_on_timer();
  // Stream: the delay from each drained token event's making to its write, into the metrics.
  void record_emit_delays();
  void on_event(const RequestEvent& e);
  bool is_stop_token(int32_t id) const;
  // Stream: one chunk with the text and logprobs of this event. Body: accumulates.
  void emit(const ReasoningDelta& d, const std::vector<GeneratedToken>& tokens,
            const std::vector<size_t>& offsets);
  void send_chunk(nlohmann::json chunk);  // the first one carries prompt_token_ids when asked
  void complete(const char* reason, nlohmann::json stop_reason);
  void fail(const ApiError& e, const char* reason);
  void abandon();
  void record(const char* reason);

  nlohmann::json envelope(nlohmann::json choices) const;  // id, object, created, model
  nlohmann::json choice(nlohmann::json delta_or_text, const nlohmann::json& logprobs,
                        const nlohmann::json& finish, const nlohmann::json& stop_reason) const;

  GenerationSetup setup_;
  const TokenCodec& codec_;
  Metrics* metrics_;
  std::shared_ptr<HttpExchange> exchange_;
  SseStream sse_;
  OutputText text_;
  std::optional<StreamChunk> chunk_;  // streams without logprobs or token ids
  std::shared_ptr<RequestHandle> handle_;
  std::mutex inbox_mutex_;  // guards inbox_ and drain_scheduled_
  std::vector<RequestEvent> inbox_, draining_;
  bool drain_scheduled_ = false;  // a drain is posted or its timer runs: deliver() posts nothing
  std::vector<std::chrono::steady_clock::time_point> emitted_;  // the drain's token events' times
  std::string id_;
  int64_t created_ = 0;
  bool done_ = false;
  bool prompt_ids_sent_ = false;
  double first_token_seconds_ = -1;
  // The whole answer, for a body; a stream sends it as it comes.
  std::string reasoning_, content_;
  size_t text_bytes_ = 0;  // completion text so far: the next token's text_offset
  nlohmann::json chat_logprobs_ = nlohmann::json::array();
  CompletionLogprobs completion_logprobs_;
  std::vector<int32_t> output_ids_;
};

}  // namespace sparkglm::server
