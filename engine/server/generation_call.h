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
// Endings: eos / stop token -> "stop"; a stop string -> "stop" and the engine request is cancelled
// at once; max_tokens -> "length"; the client gone -> the engine request is cancelled; the deadline
// -> 504 (or an error event mid-stream); server shutdown -> 503 (or an error event); a device
// fault -> 503 device_fault (or an error event, then [DONE]).
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
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
#include "engine/server/tool_call_output.h"

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
  // fields.constraint compiled for the engine's mask (RouteOptions::compile_constraint); null when
  // the output is free.
  std::shared_ptr<const CompiledGrammar> grammar;
  // Chat: the request's tools when content is searched for tool calls (ToolCallOutput); empty:
  // content is plain text.
  std::vector<nlohmann::json> tools;
  bool parallel_tool_calls = true;
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
  // Engine thread: handles `e` at once on a direct stream, else queues it and posts drain()
  // unless one is already scheduled.
  void deliver(const RequestEvent& e);
  bool direct() const { return setup_.fields.stream && setup_.flush_interval.count() == 0; }
  // Handles `events` in order and writes what they produced at once. Holds state_mutex_.
  void process(std::span<const RequestEvent> events);
  // Strand: handles every queued event, then writes what they produced at once; with a flush
  // interval, schedules the next drain by timer while the stream runs.
  void drain();
  void drain_on_timer();
  // Stream: the delay from each handled token event's making to now, its send.
  std::vector<double> emit_delays() const;
  void on_event(const RequestEvent& e);
  bool is_stop_token(int32_t id) const;
  // Stream: one chunk with the text and logprobs of this event. Body: accumulates.
  void emit(const ReasoningDelta& d, const std::vector<GeneratedToken>& tokens,
            const std::vector<size_t>& offsets);
  // Chat with tools: the calls one event completed, as a delta or into the message.
  void emit_tool_calls(nlohmann::json calls);
  nlohmann::json usage() const;
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
  std::optional<StreamChunk> chunk_;  // streams without logprobs, token ids or continuous usage
  std::optional<ToolCallOutput> tool_calls_;  // chat with tools to parse for
  std::shared_ptr<RequestHandle> handle_;
  std::mutex state_mutex_;  // held by whoever handles events or ends the call (see the top)
  std::mutex inbox_mutex_;  // guards inbox_, drain_scheduled_ and engine_writes_
  std::vector<RequestEvent> inbox_, draining_;
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
  int cached_tokens_ = 0;  // prompt tokens the prefix cache supplied (the engine's events)
  // The whole answer, for a body; a stream sends it as it comes.
  std::string reasoning_, content_;
  nlohmann::json message_calls_ = nlohmann::json::array();  // a body's message.tool_calls
  size_t text_bytes_ = 0;  // completion text so far: the next token's text_offset
  nlohmann::json chat_logprobs_ = nlohmann::json::array();
  CompletionLogprobs completion_logprobs_;
  std::vector<int32_t> output_ids_;
};

}  // namespace sparkglm::server
