#pragma once
// One chat or text completion in flight: submits the request, turns the engine's token events into
// text (OutputText) and answers the client, as one JSON body or as server-sent events.
//
// Threads. A stream (without a flush interval) is written by the engine thread itself: once start()
// has sent the stream's head, each token event is turned into its SSE chunk and sent on the
// socket from inside the engine's callback (HttpExchange::write is a non-blocking send from any
// thread), so a token leaves when it is sampled and never waits for an I/O thread to get a core.
// state_mutex_ guards the call's state against the strand (start, abandon), which is the only
// other thread that touches it. Events that arrive before start() has finished queue in the inbox
// and start() sends them, in order, before it hands the stream to the engine thread. A body, and a
// stream with a flush interval, are built on the strand instead: the engine thread only appends the
// event to the inbox and, when the inbox was empty, posts one drain, so the events that piled up
// go out in one write. Each write records its token events' delay from sampling to the send in
// Metrics (sparkglm_sse_emit_delay_seconds).
//
// Choices: `n` sequences with the same prompt go to the engine (GenerationChoice, one each; all
// count against the engine's limits like any other sequences). A stream sends each choice's chunks
// with its index and its own finish chunk as it ends; the usage chunk and [DONE] follow the last.
// A body answers once every choice has ended. usage counts the prompt once and sums the choices'
// completion tokens. A choice whose sequence fails (deadline, shutdown, engine error, device fault)
// fails the whole call and cancels the others; the client leaving cancels all of them.
//
// Endings of a choice: eos / stop token -> "stop"; a stop string -> "stop" and the engine request
// is cancelled at once; max_tokens -> "length"; the client gone -> the engine request is cancelled;
// the deadline
// -> 504 for the call (or an error event mid-stream); server shutdown -> 503 (or an error event); a
// device fault -> 503 device_fault (or an error event, then [DONE]).
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/generation_request.h"
#include "engine/server/generation_choice.h"
#include "engine/server/generation_engine.h"
#include "engine/server/generation_setup.h"
#include "engine/server/http_exchange.h"
#include "engine/server/sse_stream.h"
#include "engine/server/stream_chunk.h"
#include "engine/server/token_codec.h"

namespace sparkglm::server {

class ApiError;
class Metrics;

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  GenerationCall(GenerationSetup setup, const TokenCodec& codec, Metrics* metrics,
                 std::shared_ptr<HttpExchange> exchange);

  // On the connection's strand. Throws ApiError when the engine refuses the request (nothing has
  // been sent then); a stream's header and role chunk go out once it is queued.
  void start(GenerationEngine& engine);
  const std::string& id() const { return id_; }

 private:
  // One engine event of choice `choice`, as the inbox keeps it.
  struct ChoiceEvent {
    size_t choice;
    RequestEvent event;
  };
  // Engine thread: handles `e` at once on a direct stream, else queues it and posts drain()
  // unless one is already scheduled.
  void deliver(size_t choice, const RequestEvent& e);
  bool direct() const { return setup_.fields.stream && setup_.flush_interval.count() == 0; }
  // Handles `events` in order and writes what they produced at once. Holds state_mutex_.
  void process(std::span<const ChoiceEvent> events);
  void handle(size_t choice, const RequestEvent& e);  // one event; after_events() writes it
  void after_events();
  // Strand: handles every queued event, then writes what they produced at once; with a flush
  // interval, schedules the next drain by timer while the stream runs.
  void drain();
  void drain_on_timer();
  // Stream: the delay from each handled token event's making to now, its send.
  std::vector<double> emit_delays() const;
  void on_event(GenerationChoice& c, const RequestEvent& e);
  // Stream: the chunk of what one event showed. Body: the choice keeps it.
  void emit(GenerationChoice& c, ChoiceUpdate u);
  nlohmann::json usage() const;
  void send_chunk(nlohmann::json chunk);  // the first one carries prompt_token_ids when asked
  void complete();                        // every choice ended by itself
  void fail(const ApiError& e, const char* reason);
  void cancel_all();
  void abandon();
  void record(const char* reason);
  int completion_tokens() const;

  nlohmann::json envelope(nlohmann::json choices) const;  // id, object, created, model

  GenerationSetup setup_;
  const TokenCodec& codec_;
  Metrics* metrics_;
  std::shared_ptr<HttpExchange> exchange_;
  SseStream sse_;
  std::deque<GenerationChoice> choices_;  // setup_.fields.n of them; choices_[i] has index i
  size_t ended_choices_ = 0;
  std::optional<StreamChunk> chunk_;  // one-choice streams without logprobs, ids or usage
  std::mutex state_mutex_;  // held by whoever handles events or ends the call (see the top)
  std::mutex inbox_mutex_;  // guards inbox_, drain_scheduled_ and engine_writes_
  std::vector<ChoiceEvent> inbox_, draining_;
  bool drain_scheduled_ = false;  // a drain is posted or its timer runs: deliver() posts nothing
  bool engine_writes_ = false;    // a direct stream, started: deliver() handles events itself
  std::vector<std::chrono::steady_clock::time_point> emitted_;  // the drain's token events' times
  std::string id_;
  int64_t created_ = 0;
  bool done_ = false;
  // Set by complete() / fail() while process() handles an event: the stream's end and the
  // metrics record wait until the event's bytes are sent.
  bool ending_ = false;
  const char* finished_ = nullptr;
  bool prompt_ids_sent_ = false;
  std::string prompt_ids_json_;  // a stream's prompt_token_ids, printed before the first token
  double first_token_seconds_ = -1;
  int cached_tokens_ = 0;  // prompt tokens the prefix cache supplied to choice 0 (its events)
};

}  // namespace sparkglm::server
