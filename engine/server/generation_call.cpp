#include "engine/server/generation_call.h"

#include <algorithm>
#include <string_view>

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

OutputTextOptions text_options(const GenerationSetup& s) {
  OutputTextOptions o;
  o.stop = s.fields.stop;
  o.include_stop_str_in_output = s.fields.include_stop_str_in_output;
  o.skip_special_tokens = s.fields.skip_special_tokens;
  o.split_reasoning = s.kind == ApiKind::kChat;
  o.starts_in_reasoning = s.thinking;
  o.min_tokens = s.fields.sampling.min_tokens;
  return o;
}

}  // namespace

GenerationCall::GenerationCall(GenerationSetup setup, const TokenCodec& codec, Metrics* metrics,
                               std::shared_ptr<HttpExchange> exchange)
    : setup_(std::move(setup)),
      codec_(codec),
      metrics_(metrics),
      exchange_(std::move(exchange)),
      sse_(exchange_),
      text_(codec_, text_options(setup_)),
      id_(new_request_id(setup_.kind == ApiKind::kChat ? "chatcmpl" : "cmpl")),
      created_(unix_seconds()) {
  const GenerationFields& f = setup_.fields;
  if (f.stream && !f.sampling.logprobs && !f.return_token_ids && !f.continuous_usage_stats)
    chunk_.emplace(setup_.kind == ApiKind::kChat, id_, created_, setup_.model_id, f.include_usage);
  if (!setup_.tools.empty()) tool_calls_.emplace(setup_.tools, setup_.parallel_tool_calls);
}

void GenerationCall::start(GenerationEngine& engine) {
  GenerationRequest request;
  request.prompt = setup_.prompt;
  request.sampling = setup_.fields.sampling;
  request.cache_salt = setup_.fields.cache_salt;
  request.disable_speculation = setup_.fields.disable_mtp;
  request.constraint = setup_.fields.constraint;
  request.grammar = setup_.grammar;
  if (setup_.request_timeout_s > 0)
    request.deadline =
        setup_.arrived + std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::duration<double>(setup_.request_timeout_s));
  // The call lives as long as the engine holds this closure.
  if (setup_.fields.stream && setup_.fields.return_token_ids)
    prompt_ids_json_ = json(setup_.prompt).dump();
  auto self = shared_from_this();
  request.on_event = [self](const RequestEvent& e) { self->deliver(e); };
  try {
    handle_ = engine.submit(std::move(request));
  } catch (const Error& e) {
    throw api_error_from(e);
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
  if (setup_.kind == ApiKind::kChat) {
    json first = envelope(
        json::array({choice({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr, nullptr)}));
    send_chunk(std::move(first));
  }
  if (!direct()) return sse_.flush();
  // The head is out: from here on the engine thread writes. Events that came first go now, in
  // order (a drain they posted finds the inbox empty).
  std::vector<RequestEvent> early;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    early.swap(inbox_);
    engine_writes_ = true;
  }
  process(early);
}

void GenerationCall::deliver(const RequestEvent& e) {
  bool post = false, now = false;
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    now = engine_writes_;
    if (!now) {
      inbox_.push_back(e);
      post = !drain_scheduled_;
      drain_scheduled_ = true;
    }
  }
  if (now) {
    std::lock_guard<std::mutex> state(state_mutex_);
    return process({&e, 1});  // no copy: the event is handled here and now
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

void GenerationCall::process(std::span<const RequestEvent> events) {
  emitted_.clear();
  for (const RequestEvent& e : events) {
    if (!done_ && !e.tokens.empty()) emitted_.push_back(e.time);
    try {
      on_event(e);
    } catch (const std::exception& ex) {
      // A defect here must still end the request, for the client and for the engine.
      if (handle_) handle_->cancel();
      if (!done_) fail(ApiError::internal(ex.what()), "error");
    }
  }
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

bool GenerationCall::is_stop_token(int32_t id) const {
  const auto& stops = setup_.fields.sampling.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), id) != stops.end()) return true;
  return !setup_.fields.sampling.ignore_eos &&
         std::find(setup_.eos_ids.begin(), setup_.eos_ids.end(), id) != setup_.eos_ids.end();
}

void GenerationCall::on_event(const RequestEvent& e) {
  if (done_)
    return;  // finished by a stop string, or the client left; later events are the engine's
  if (!e.tokens.empty() && first_token_seconds_ < 0)
    first_token_seconds_ = seconds_between(setup_.arrived, std::chrono::steady_clock::now());
  cached_tokens_ = e.cached_tokens;

  ReasoningDelta delta;
  std::vector<GeneratedToken> shown;
  std::vector<size_t> offsets;
  for (size_t i = 0; i < e.tokens.size(); ++i) {
    const GeneratedToken& t = e.tokens[i];
    const bool terminal =
        e.finish == FinishReason::kStop && i + 1 == e.tokens.size() && is_stop_token(t.id);
    offsets.push_back(text_bytes_);
    ReasoningDelta d = text_.add(t.id, terminal);
    text_bytes_ += d.content.size() + d.reasoning.size();
    delta.reasoning += d.reasoning;
    delta.content += d.content;
    shown.push_back(t);
    output_ids_.push_back(t.id);
    if (text_.stop_string()) break;
  }
  const bool stopped_by_string = text_.stop_string().has_value();
  const bool ending = stopped_by_string || e.finish != FinishReason::kNone;
  if (ending && !stopped_by_string) {
    ReasoningDelta rest = text_.finish();
    delta.reasoning += rest.reasoning;
    delta.content += rest.content;
  }
  json calls = json::array();
  if (tool_calls_) {
    delta.content = tool_calls_->feed(delta.content, calls);
    if (ending) delta.content += tool_calls_->flush(calls);
  }
  emit(delta, shown, offsets);
  if (!calls.empty()) emit_tool_calls(std::move(calls));

  if (text_.stop_string()) {
    // The stop string is the server's: the engine learns of it through cancellation.
    if (handle_) handle_->cancel();
    return complete("stop", *text_.stop_string());
  }
  switch (e.finish) {
    case FinishReason::kNone:
      return;
    case FinishReason::kStop: {
      json reason = nullptr;
      if (!e.tokens.empty() && is_stop_token(e.tokens.back().id)) reason = e.tokens.back().id;
      return complete("stop", reason);
    }
    case FinishReason::kLength:
      return complete("length", nullptr);
    case FinishReason::kTimeout:
      return fail(ApiError::request_timeout("the request ran past its deadline of " +
                                            std::to_string(setup_.request_timeout_s) +
                                            " s (--request-timeout) after " +
                                            std::to_string(text_.tokens()) + " generated tokens"),
                  "timeout");
    case FinishReason::kCancelled:
      return fail(ApiError::shutting_down(), "abort");
    case FinishReason::kError:
      return fail(ApiError::internal("the engine failed this request: " + e.error), "error");
    case FinishReason::kDeviceFault:
      return fail(ApiError::device_fault(e.error), "device_fault");
  }
}

void GenerationCall::emit(const ReasoningDelta& d, const std::vector<GeneratedToken>& tokens,
                          const std::vector<size_t>& offsets) {
  const bool logprobs = setup_.fields.sampling.logprobs;
  const bool chat = setup_.kind == ApiKind::kChat;
  if (!setup_.fields.stream) {
    reasoning_ += d.reasoning;
    content_ += d.content;
    if (logprobs)
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (chat)
          chat_logprobs_.push_back(chat_logprob(codec_, tokens[i]));
        else
          completion_logprobs_.add(codec_, tokens[i], offsets[i]);
      }
    return;
  }
  if (d.empty() && tokens.empty()) return;
  if (d.empty() && !logprobs && !setup_.fields.return_token_ids) return;
  if (chunk_ && chunk_->append_delta(sse_.gathered(), d.reasoning, d.content)) {
    prompt_ids_sent_ = true;
    return;
  }
  json lp = nullptr;
  if (logprobs && !tokens.empty()) {
    if (chat) {
      json content = json::array();
      for (const auto& t : tokens) content.push_back(chat_logprob(codec_, t));
      lp = {{"content", std::move(content)}};
    } else {
      CompletionLogprobs c;
      for (size_t i = 0; i < tokens.size(); ++i) c.add(codec_, tokens[i], offsets[i]);
      lp = c.to_json();
    }
  }
  json body;
  if (chat) {
    body = json::object();
    if (!d.reasoning.empty()) body["reasoning"] = body["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) body["content"] = d.content;
  } else {
    body = d.content;
  }
  json c = choice(std::move(body), lp, nullptr, nullptr);
  if (setup_.fields.return_token_ids) {
    json ids = json::array();
    for (const auto& t : tokens) ids.push_back(t.id);
    c["token_ids"] = std::move(ids);
  }
  send_chunk(envelope(json::array({std::move(c)})));
}

void GenerationCall::emit_tool_calls(json calls) {
  if (!setup_.fields.stream) {
    for (json& call : calls) {
      call.erase("index");
      message_calls_.push_back(std::move(call));
    }
    return;
  }
  send_chunk(envelope(
      json::array({choice({{"tool_calls", std::move(calls)}}, nullptr, nullptr, nullptr)})));
}

json GenerationCall::usage() const {
  return usage_json(int(setup_.prompt.size()), text_.tokens(), text_.reasoning_tokens(),
                    cached_tokens_);
}

void GenerationCall::complete(const char* reason, json stop_reason) {
  done_ = true;
  // A turn that ended by itself after calling tools asks for their results.
  if (tool_calls_ && tool_calls_->calls() > 0 && std::string_view(reason) == "stop")
    reason = "tool_calls";
  const json usage = this->usage();
  const bool chat = setup_.kind == ApiKind::kChat;
  if (setup_.fields.stream) {
    send_chunk(envelope(json::array(
        {choice(chat ? json::object() : json(""), nullptr, reason, std::move(stop_reason))})));
    if (setup_.fields.include_usage) {
      json u = envelope(json::array());
      u["usage"] = usage;
      sse_.send(u);
    }
    sse_.gathered() += sse_done();
    ending_ = true;  // process() sends it, then ends the stream
  } else {
    json body;
    json lp = nullptr;
    if (chat) {
      json message = {{"role", "assistant"}, {"content", content_}};
      if (!message_calls_.empty()) {
        message["tool_calls"] = message_calls_;
        if (content_.empty()) message["content"] = nullptr;
      }
      // `reasoning` is vLLM's current name; `reasoning_content` stays for older clients.
      if (setup_.thinking) message["reasoning"] = message["reasoning_content"] = reasoning_;
      if (setup_.fields.sampling.logprobs) lp = {{"content", chat_logprobs_}};
      body = message;
    } else {
      if (setup_.fields.sampling.logprobs) lp = completion_logprobs_.to_json();
      body = content_;
    }
    json c = choice(std::move(body), lp, reason, std::move(stop_reason));
    if (setup_.fields.return_token_ids) c["token_ids"] = output_ids_;
    json r = envelope(json::array({std::move(c)}));
    r["usage"] = usage;
    if (setup_.fields.return_token_ids) r["prompt_token_ids"] = setup_.prompt;
    exchange_->respond(HttpResponse::json(200, r));
  }
  finished_ = reason;
}

void GenerationCall::fail(const ApiError& e, const char* reason) {
  done_ = true;
  if (setup_.fields.stream) {
    sse_.send_error(e);
    sse_.gathered() += sse_done();
    ending_ = true;
  } else {
    exchange_->respond(HttpResponse::error(e));
  }
  finished_ = reason;
}

void GenerationCall::abandon() {
  std::lock_guard<std::mutex> state(state_mutex_);
  if (done_) return;
  done_ = true;
  if (handle_) handle_->cancel();
  record("abort");
}

void GenerationCall::record(const char* reason) {
  if (metrics_)
    metrics_->record_generation(reason, int(setup_.prompt.size()), text_.tokens(),
                                first_token_seconds_,
                                seconds_between(setup_.arrived, std::chrono::steady_clock::now()));
}

json GenerationCall::envelope(json choices) const {
  const bool chat = setup_.kind == ApiKind::kChat;
  const char* object = chat ? (setup_.fields.stream ? "chat.completion.chunk" : "chat.completion")
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

json GenerationCall::choice(json delta_or_text, const json& logprobs, const json& finish,
                            const json& stop_reason) const {
  json c = {{"index", 0}};
  if (setup_.kind == ApiKind::kChat)
    c[setup_.fields.stream ? "delta" : "message"] = std::move(delta_or_text);
  else
    c["text"] = std::move(delta_or_text);
  c["logprobs"] = logprobs;
  c["finish_reason"] = finish;
  if (!finish.is_null()) c["stop_reason"] = stop_reason;
  return c;
}

}  // namespace sparkglm::server
