#include "engine/server/generation_call.h"

#include <exception>
#include <utility>

#include "engine/core/error.h"
#include "engine/server/api_error.h"
#include "engine/server/metrics.h"
#include "engine/server/server_log.h"

namespace sparkglm::server {

using nlohmann::json;

namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

GenerationCall::GenerationCall(GenerationSetup setup, const TokenCodec& codec, Metrics* metrics,
                               std::shared_ptr<HttpExchange> exchange)
    : setup_(std::move(setup)),
      codec_(codec),
      metrics_(metrics),
      exchange_(std::move(exchange)),
      sse_(exchange_),
      id_(new_request_id(setup_.chat() ? "chatcmpl" : "cmpl")),
      created_(unix_seconds()) {
  const GenerationFields& f = setup_.fields;
  for (int i = 0; i < f.n; ++i) choices_.emplace_back(i, setup_, codec_);
  // The written-out chunk knows one choice, index 0.
  if (f.stream && f.n == 1 && !f.sampling.logprobs && !f.return_token_ids &&
      !f.continuous_usage_stats)
    chunk_.emplace(setup_.chat(), id_, created_, setup_.model_id, f.include_usage);
}

void GenerationCall::start(GenerationEngine& engine) {
  // The call lives as long as the engine holds the closures.
  if (setup_.fields.stream && setup_.fields.return_token_ids)
    prompt_ids_json_ = nlohmann::json(setup_.prompt).dump();
  auto self = shared_from_this();
  for (GenerationChoice& c : choices_) {
    GenerationRequest request = c.request();
    request.on_event = [self, i = size_t(c.index())](const RequestEvent& e) {
      self->deliver(i, e);
    };
    try {
      c.handle = engine.submit(std::move(request));
    } catch (const Error& e) {
      cancel_all();  // the choices queued before this one
      throw api_error_from(e);
    }
  }
  if (!setup_.fields.cache_salt.empty())
    log_line("request " + id_ + " cache_salt=" + client_text(setup_.fields.cache_salt));
  exchange_->on_abandon([self] { self->abandon(); });
  if (!exchange_->open()) return abandon();  // the client left while the request was queued
  if (!setup_.fields.stream) return;
  std::lock_guard<std::mutex> state(state_mutex_);
  sse_.begin();
  // Chat streams open with the role, as OpenAI's do; a text completion's first chunk is its first
  // text, so that a client timing the first chunk times the first token.
  if (setup_.chat())
    for (const GenerationChoice& c : choices_) send_chunk(envelope(json::array({c.role_choice()})));
  if (!direct()) return sse_.flush();
  // The head is out: from here on the engine thread writes. Events that came first go now, in
  // order (a drain they posted finds the inbox empty).
  std::vector<ChoiceEvent> early;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    early.swap(inbox_);
    engine_writes_ = true;
  }
  process(early);
}

void GenerationCall::deliver(size_t choice, const RequestEvent& e) {
  bool post = false, now = false;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    now = engine_writes_;
    if (!now) {
      inbox_.push_back({choice, e});
      post = !drain_scheduled_;
      drain_scheduled_ = true;
    }
  }
  if (now) {
    std::lock_guard<std::mutex> state(state_mutex_);
    handle(choice, e);  // no copy: the event is handled here and now
    return after_events();
  }
  if (post) exchange_->post([self = shared_from_this()] { self->drain(); });
}

void GenerationCall::drain_on_timer() {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    if (inbox_.empty()) {
      drain_scheduled_ = false;  // quiet: the next event is posted at once
      return;
    }
  }
  drain();
}

void GenerationCall::drain() {
  const bool timed = setup_.fields.stream && setup_.flush_interval.count() > 0;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    draining_.swap(inbox_);
    // Without a timer, the next event posts a drain again. (With one, drain_scheduled_ stays
    // set until a timer finds the inbox empty.)
    if (!timed) drain_scheduled_ = false;
  }
  {
    std::lock_guard<std::mutex> state(state_mutex_);
    process(draining_);
  }
  draining_.clear();  // keeps its capacity for the next drain
  if (timed && !done_) {
    // The next multiple of the interval on the steady clock, the same instant for every stream:
    // one wake-up of the I/O thread then drains them all.
    const auto iv =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(setup_.flush_interval);
    const auto now = std::chrono::steady_clock::now();
    exchange_->post_at(now + iv - now.time_since_epoch() % iv,
                       [self = shared_from_this()] { self->drain_on_timer(); });
  }
}

void GenerationCall::process(std::span<const ChoiceEvent> events) {
  emitted_.clear();
  for (const ChoiceEvent& e : events) handle(e.choice, e.event);
  after_events();
}

void GenerationCall::handle(size_t choice, const RequestEvent& e) {
  if (!done_ && !e.tokens.empty()) emitted_.push_back(e.time);
  try {
    on_event(choices_[choice], e);
  } catch (const std::exception& ex) {
    // A defect here must still end the request, for the client and for the engine.
    cancel_all();
    if (!done_) fail(ApiError::internal(ex.what()), "error");
  }
}

void GenerationCall::after_events() {
  if (setup_.fields.stream) {
    // Timed as the bytes are handed to the socket: a send that wakes the client can lose the core
    // inside the system call, after the bytes are on their way; that wait is not the server's.
    // The metrics (a lock shared with /metrics) are told after the send.
    const std::vector<double> delays = emit_delays();
    sse_.flush();
    if (ending_) exchange_->end_stream();
    ending_ = false;
    if (metrics_ && !delays.empty()) metrics_->record_sse_emit_delays(delays);
  }
  if (finished_) record(finished_);  // after the send: the metrics lock is shared with /metrics
  finished_ = nullptr;
  emitted_.clear();
}

std::vector<double> GenerationCall::emit_delays() const {
  std::vector<double> delays;
  if (!metrics_ || emitted_.empty()) return delays;
  const auto written = std::chrono::steady_clock::now();
  delays.reserve(emitted_.size());
  for (const auto& made : emitted_) delays.push_back(seconds_between(made, written));
  return delays;
}

void GenerationCall::send_chunk(json chunk) {
  if (prompt_ids_sent_ || !setup_.fields.return_token_ids) return sse_.send(chunk);
  prompt_ids_sent_ = true;
  // The prompt's ids were printed in start(): a 20K-token list takes a millisecond, which must not
  // sit between the first token's sampling and its send. They close the event's object.
  std::string event = sse_event(chunk);  // data: {...}\n\n
  event.insert(event.size() - 3, ",\"prompt_token_ids\":" + prompt_ids_json_);
  sse_.gathered() += event;
}

void GenerationCall::on_event(GenerationChoice& c, const RequestEvent& e) {
  if (done_ || c.ended())
    return;  // ended by a stop string, or the client left; later events are the engine's
  if (!e.tokens.empty() && first_token_seconds_ < 0)
    first_token_seconds_ = seconds_between(setup_.arrived, std::chrono::steady_clock::now());
  if (c.index() == 0) cached_tokens_ = e.cached_tokens;
  emit(c, c.add(e));
  if (c.finish_reason()) {
    if (setup_.fields.stream) send_chunk(envelope(json::array({c.final_chunk_choice()})));
    if (++ended_choices_ == choices_.size()) complete();
    return;
  }
  switch (e.finish) {
    case FinishReason::kNone:
    case FinishReason::kStop:
    case FinishReason::kLength:
      return;
    case FinishReason::kTimeout:
      return fail(ApiError::request_timeout(
                      "the request ran past its deadline of " +
                      std::to_string(setup_.request_timeout_s) + " s (--request-timeout) after " +
                      std::to_string(completion_tokens()) + " generated tokens"),
                  "timeout");
    case FinishReason::kCancelled:
      return fail(ApiError::shutting_down(), "abort");
    case FinishReason::kError:
      return fail(ApiError::internal("the engine failed this request: " + e.error), "error");
    case FinishReason::kDeviceFault:
      return fail(ApiError::device_fault(e.error), "device_fault");
  }
}

void GenerationCall::emit(GenerationChoice& c, ChoiceUpdate u) {
  if (!setup_.fields.stream) return c.keep(std::move(u));
  if (chunk_ && !u.text.empty() &&
      chunk_->append_delta(sse_.gathered(), u.text.reasoning, u.text.content)) {
    prompt_ids_sent_ = true;
  } else if (json choice = c.stream_choice(u); !choice.is_null()) {
    send_chunk(envelope(json::array({std::move(choice)})));
  }
  if (!u.calls.empty()) send_chunk(envelope(json::array({c.calls_choice(std::move(u.calls))})));
}

int GenerationCall::completion_tokens() const {
  int tokens = 0;
  for (const GenerationChoice& c : choices_) tokens += c.tokens();
  return tokens;
}

json GenerationCall::usage() const {
  int reasoning = 0;
  for (const GenerationChoice& c : choices_) reasoning += c.reasoning_tokens();
  return usage_json(int(setup_.prompt.size()), completion_tokens(), reasoning, cached_tokens_);
}

void GenerationCall::complete() {
  done_ = true;
  if (setup_.fields.stream) {
    if (setup_.fields.include_usage) {
      json u = envelope(json::array());
      u["usage"] = usage();
      sse_.send(u);
    }
    sse_.gathered() += sse_done();
    ending_ = true;  // process() sends it, then ends the stream
  } else {
    json answers = json::array();
    for (const GenerationChoice& c : choices_) answers.push_back(c.answer());
    json r = envelope(std::move(answers));
    r["usage"] = usage();
    if (setup_.fields.return_token_ids) r["prompt_token_ids"] = setup_.prompt;
    exchange_->respond(HttpResponse::json(200, r));
  }
  finished_ = choices_.front().finish_reason();  // the metrics count the call once, by choice 0
}

void GenerationCall::fail(const ApiError& e, const char* reason) {
  done_ = true;
  cancel_all();  // one choice's failure ends the others
  if (setup_.fields.stream) {
    sse_.send_error(e);
    sse_.gathered() += sse_done();
    ending_ = true;
  } else {
    exchange_->respond(HttpResponse::error(e));
  }
  finished_ = reason;
}

void GenerationCall::cancel_all() {
  for (GenerationChoice& c : choices_)
    if (c.handle) c.handle->cancel();
}

void GenerationCall::abandon() {
  std::lock_guard<std::mutex> state(state_mutex_);
  if (done_) return;
  done_ = true;
  cancel_all();
  record("abort");
}

void GenerationCall::record(const char* reason) {
  if (metrics_)
    metrics_->record_generation(reason, int(setup_.prompt.size()), completion_tokens(),
                                first_token_seconds_,
                                seconds_between(setup_.arrived, std::chrono::steady_clock::now()));
}

json GenerationCall::envelope(json choices) const {
  const char* object = setup_.chat()
                           ? (setup_.fields.stream ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  json r = {{"id", id_},
            {"object", object},
            {"created", created_},
            {"model", setup_.model_id},
            {"choices", std::move(choices)}};
  if (setup_.fields.stream && setup_.fields.include_usage) r["usage"] = nullptr;
  // stream_options.continuous_usage_stats: every chunk says the counts so far.
  if (setup_.fields.stream && setup_.fields.continuous_usage_stats) r["usage"] = usage();
  return r;
}

}  // namespace sparkglm::server
