#pragma once
// The routes' test fixture: a scripted engine and an in-memory exchange, so the tests see what a
// client receives for each kind of engine event, without HTTP or a model.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/server/api_error.h"
#include "engine/server/metrics.h"
#include "engine/server/openai_routes.h"
#include "engine/text/byte_tokenizer.h"

namespace sparkglm::server {

using nlohmann::json;

class ScriptedEngine : public GenerationEngine {
 public:
  std::shared_ptr<RequestHandle> submit(GenerationRequest request) override {
    if (refuse || requests.size() >= refuse_from)
      throw Error(ErrorKind::kCapacity, "needs 9999 tokens; the pool holds 1024");
    requests.push_back(std::move(request));
    handles.push_back(std::make_shared<RequestHandle>(handles.size() + 1));
    return handles.back();
  }
  EngineStats stats() const override {
    EngineStats s;
    s.total_blocks = 64;
    s.free_blocks = 60;
    s.block_size = 16;
    return s;
  }
  // Sends one event for the latest request, as the engine thread would.
  void token(int32_t id, FinishReason finish = FinishReason::kNone, float logprob = -0.5f) {
    token_to(requests.size() - 1, id, finish, logprob);
  }
  void finish(FinishReason finish, const std::string& error = "") {
    finish_to(requests.size() - 1, finish, error);
  }
  // The same for the i-th request submitted (a request with `n` choices submits n).
  void token_to(size_t i, int32_t id, FinishReason finish = FinishReason::kNone,
                float logprob = -0.5f) {
    RequestEvent e;
    e.tokens.push_back({id, logprob, {{id, logprob}, {id + 1, logprob - 1.0f}}});
    e.finish = finish;
    requests.at(i).on_event(e);
  }
  void finish_to(size_t i, FinishReason finish, const std::string& error = "") {
    RequestEvent e;
    e.finish = finish;
    e.error = error;
    requests.at(i).on_event(e);
  }

  bool refuse = false;
  size_t refuse_from = SIZE_MAX;  // refuses the submissions from this many on
  std::vector<GenerationRequest> requests;
  std::vector<std::shared_ptr<RequestHandle>> handles;
};

// Records what the server would send; posted work runs when the test calls run_posted().
class RecordingExchange : public HttpExchange {
 public:
  void post(std::function<void()> fn) override { posted.push_back(std::move(fn)); }
  void post_at(std::chrono::steady_clock::time_point, std::function<void()> fn) override {
    posted.push_back(std::move(fn));
  }
  void respond(HttpResponse r) override {
    if (!is_open) return;
    response = std::move(r);
    is_open = false;
    on_abandon_fn = nullptr;
  }
  void begin_stream(int s, const std::string& type) override {
    if (!is_open) return;
    stream_status = s;
    content_type = type;
  }
  void write(std::string bytes) override {
    if (!is_open) return;
    body += bytes;
    ++writes;
  }
  void end_stream() override {
    is_open = false;
    ended = true;
    on_abandon_fn = nullptr;
  }
  void on_abandon(std::function<void()> fn) override { on_abandon_fn = std::move(fn); }
  bool open() const override { return is_open; }

  void run_one() {
    auto fn = std::move(posted.front());
    posted.pop_front();
    fn();
  }
  void run_posted() {
    while (!posted.empty()) {
      auto fn = std::move(posted.front());
      posted.pop_front();
      fn();
    }
  }
  void client_leaves() {
    is_open = false;
    if (auto fn = std::move(on_abandon_fn)) fn();
  }
  // The data: payloads of the stream.
  std::vector<json> events() const {
    std::vector<json> out;
    size_t pos = 0;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
      const size_t end = body.find("\n\n", pos);
      const std::string payload = body.substr(pos + 6, end - pos - 6);
      out.push_back(payload == "[DONE]" ? json("[DONE]") : json::parse(payload));
      pos = end;
    }
    return out;
  }
  json json_body() const { return json::parse(response->body); }

  std::deque<std::function<void()>> posted;
  std::optional<HttpResponse> response;
  int stream_status = 0;
  std::string content_type, body;
  bool is_open = true, ended = false;
  int writes = 0;
  std::function<void()> on_abandon_fn;
};

class RoutesTest : public ::testing::Test {
 protected:
  RoutesTest() : codec_(make_byte_codec()) { make_routes(""); }

  void make_routes(const std::string& api_key,
                   std::chrono::microseconds flush_interval = std::chrono::microseconds(0),
                   int max_num_seqs = 4) {
    RouteOptions o;
    o.max_num_seqs = max_num_seqs;
    o.stream_flush_interval = flush_interval;
    o.model = {"tinyglm-micro", 256, 320};
    o.api_key = api_key;
    o.kv_pool_tokens = 200;
    o.eos_ids = {ByteTokenizer::kEndOfText, ByteTokenizer::kUser, ByteTokenizer::kObservation};
    o.request_timeout_s = 5;
    routes_ = std::make_unique<OpenAiRoutes>(o, engine_, *codec_, metrics_);
  }

  // Handles one request; an ApiError becomes the response, as the server does.
  std::shared_ptr<RecordingExchange> call(const std::string& method, const std::string& path,
                                          const json& body = nullptr,
                                          const std::string& auth = "") {
    auto ex = std::make_shared<RecordingExchange>();
    HttpRequest r;
    r.method = method;
    r.path = path;
    r.body = body.is_null() ? "" : body.dump();
    r.authorization = auth;
    try {
      routes_->handle(r, ex);
    } catch (const ApiError& e) {
      ex->respond(HttpResponse::error(e));
    }
    return ex;
  }

  static json chat_body(json extra = json::object()) {
    json b = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
              {"max_tokens", 8}};
    for (auto& [k, v] : extra.items()) b[k] = v;
    return b;
  }

  ScriptedEngine engine_;
  std::unique_ptr<TokenCodec> codec_;
  Metrics metrics_;
  std::unique_ptr<OpenAiRoutes> routes_;
};

}  // namespace sparkglm::server
