// The routes and a generation's answer, with a scripted engine and an in-memory exchange: what a
// client receives for each kind of engine event, without HTTP or a model.
#include "engine/server/openai_routes.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/server/api_error.h"
#include "engine/server/metrics.h"
#include "engine/text/byte_tokenizer.h"

namespace sparkglm::server {
namespace {

using nlohmann::json;

class ScriptedEngine : public GenerationEngine {
 public:
  std::shared_ptr<RequestHandle> submit(GenerationRequest request) override {
    if (refuse) throw Error(ErrorKind::kCapacity, "needs 9999 tokens; the pool holds 1024");
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
    RequestEvent e;
    e.tokens.push_back({id, logprob, {{id, logprob}, {id + 1, logprob - 1.0f}}});
    e.finish = finish;
    requests.back().on_event(e);
  }
  void finish(FinishReason finish, const std::string& error = "") {
    RequestEvent e;
    e.finish = finish;
    e.error = error;
    requests.back().on_event(e);
  }

  bool refuse = false;
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
                   std::chrono::microseconds flush_interval = std::chrono::microseconds(0)) {
    RouteOptions o;
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

TEST_F(RoutesTest, UnknownPathIs404AndWrongMethod405WithAllow) {
  auto ex = call("GET", "/v2/x");
  EXPECT_EQ(ex->response->status, 404);
  ex = call("GET", "/v1/chat/completions");
  EXPECT_EQ(ex->response->status, 405);
  ASSERT_EQ(ex->response->headers.size(), 1u);
  EXPECT_EQ(ex->response->headers[0], (std::pair<std::string, std::string>{"Allow", "POST"}));
  EXPECT_EQ(call("POST", "/health")->response->status, 405);
}

TEST_F(RoutesTest, ApiKeyGuardsEveryRouteButHealth) {
  make_routes("k3y");
  EXPECT_EQ(call("GET", "/v1/models")->response->status, 401);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "Bearer nope")->response->status, 401);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "Bearer k3y2")->response->status, 401);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "Bearer k3y")->response->status, 200);
  EXPECT_EQ(call("GET", "/health")->response->status, 200);
  EXPECT_EQ(call("POST", "/tokenize", {{"prompt", "a"}})->response->status, 401);
  EXPECT_EQ(call("POST", "/detokenize", {{"tokens", {1}}})->response->status, 401);
  EXPECT_EQ(call("GET", "/metrics")->response->status, 401);
  EXPECT_EQ(call("POST", "/tokenize", {{"prompt", "a"}}, "Bearer k3y")->response->status, 200);
  EXPECT_EQ(call("GET", "/metrics", nullptr, "Bearer k3y")->response->status, 200);
}

TEST_F(RoutesTest, ModelsHealthAndMetrics) {
  auto ex = call("GET", "/v1/models");
  EXPECT_EQ(ex->json_body()["data"][0]["id"], "tinyglm-micro");
  EXPECT_EQ(call("GET", "/health")->json_body()["status"], "ok");
  ex = call("GET", "/metrics");
  EXPECT_NE(ex->response->body.find("sparkglm_kv_blocks_used 4\n"), std::string::npos);
  EXPECT_NE(ex->response->content_type.find("text/plain"), std::string::npos);
  routes_->set_draining();
  EXPECT_EQ(call("GET", "/health")->response->status, 503);
  EXPECT_EQ(call("POST", "/v1/chat/completions", chat_body())->response->status, 503);
  EXPECT_TRUE(engine_.requests.empty());
}

TEST_F(RoutesTest, ChatPromptIsTheRenderedTemplate) {
  call("POST", "/v1/chat/completions", chat_body());
  ASSERT_EQ(engine_.requests.size(), 1u);
  const auto& prompt = engine_.requests[0].prompt;
  const std::string rendered = parse_chat_messages(chat_body()).render();
  EXPECT_EQ(rendered.rfind("[gMASK]<sop>", 0), 0u) << rendered;
  EXPECT_EQ(prompt, ByteTokenizer().encode(rendered));
  EXPECT_EQ(engine_.requests[0].sampling.max_tokens, 8);
  EXPECT_LT(engine_.requests[0].deadline, std::chrono::steady_clock::time_point::max());
}

TEST_F(RoutesTest, DefaultMaxTokensIsBoundedByContextAndPool) {
  json body = chat_body();
  body.erase("max_tokens");
  call("POST", "/v1/chat/completions", body);
  ASSERT_EQ(engine_.requests.size(), 1u);
  const int prompt = int(engine_.requests[0].prompt.size());
  EXPECT_EQ(engine_.requests[0].sampling.max_tokens, 200 - prompt);  // pool 200 < context 256
}

TEST_F(RoutesTest, PromptTooLongAndOutputBeyondContextAre400) {
  auto ex = call("POST", "/v1/completions", {{"prompt", std::string(300, 'x')}});
  EXPECT_EQ(ex->response->status, 400);
  EXPECT_NE(ex->response->body.find("256"), std::string::npos);
  ex = call("POST", "/v1/completions", {{"prompt", "x"}, {"max_tokens", 255}});
  EXPECT_EQ(ex->response->status, 400);
  EXPECT_EQ(ex->json_body()["error"]["param"], "max_tokens");
  EXPECT_TRUE(engine_.requests.empty());
}

TEST_F(RoutesTest, EngineCapacityRefusalIs400SayingTheLimits) {
  engine_.refuse = true;
  auto ex = call("POST", "/v1/chat/completions", chat_body({{"stream", true}}));
  ASSERT_TRUE(ex->response);
  EXPECT_EQ(ex->response->status, 400);
  EXPECT_NE(ex->response->body.find("1024"), std::string::npos);
  EXPECT_EQ(ex->stream_status, 0);  // nothing was streamed before the refusal
}

TEST_F(RoutesTest, BlockingChatAnswerWithUsageAndReasoning) {
  auto ex = call("POST", "/v1/chat/completions", chat_body({{"logprobs", true}}));
  for (char c : std::string("hmm")) engine_.token(c);
  engine_.token(ByteTokenizer::kEndThink);
  engine_.token('\n');
  engine_.token('O');
  engine_.token('K');
  engine_.token(ByteTokenizer::kUser, FinishReason::kStop);
  ex->run_posted();
  ASSERT_TRUE(ex->response);
  EXPECT_EQ(ex->response->status, 200);
  const json r = ex->json_body();
  EXPECT_EQ(r["object"], "chat.completion");
  const json& c = r["choices"][0];
  EXPECT_EQ(c["message"]["reasoning_content"], "hmm");
  EXPECT_EQ(c["message"]["content"], "OK");
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_EQ(c["stop_reason"], ByteTokenizer::kUser);
  EXPECT_EQ(c["logprobs"]["content"].size(), 8u);
  EXPECT_EQ(c["logprobs"]["content"][0]["token"], "h");
  EXPECT_EQ(c["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(r["usage"]["completion_tokens"], 8);
  EXPECT_EQ(r["usage"]["completion_tokens_details"]["reasoning_tokens"], 4);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(r["usage"]["prompt_tokens"], int(engine_.requests[0].prompt.size()));
}

TEST_F(RoutesTest, ThinkingOffHasNoReasoningContent) {
  auto ex = call("POST", "/v1/chat/completions",
                 chat_body({{"chat_template_kwargs", {{"enable_thinking", false}}}}));
  engine_.token('h');
  engine_.token('i', FinishReason::kLength);
  ex->run_posted();
  const json m = ex->json_body()["choices"][0]["message"];
  EXPECT_FALSE(m.contains("reasoning_content"));
  EXPECT_EQ(m["content"], "hi");
  EXPECT_EQ(ex->json_body()["choices"][0]["finish_reason"], "length");
}

TEST_F(RoutesTest, StreamingChatEventOrder) {
  auto ex = call("POST", "/v1/chat/completions",
                 chat_body({{"stream", true},
                            {"stream_options", {{"include_usage", true}}},
                            {"chat_template_kwargs", {{"enable_thinking", false}}},
                            {"return_token_ids", true}}));
  EXPECT_EQ(ex->stream_status, 200);
  EXPECT_NE(ex->content_type.find("text/event-stream"), std::string::npos);
  engine_.token('a');
  engine_.token('b');
  engine_.token('c', FinishReason::kLength);
  ex->run_posted();
  EXPECT_TRUE(ex->ended);
  const auto ev = ex->events();
  ASSERT_EQ(ev.size(), 7u) << ex->body;
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(ev[0].contains("prompt_token_ids"));
  EXPECT_EQ(ev[1]["choices"][0]["delta"]["content"], "a");
  EXPECT_EQ(ev[1]["choices"][0]["token_ids"], json({'a'}));
  EXPECT_EQ(ev[3]["choices"][0]["delta"]["content"], "c");
  EXPECT_EQ(ev[4]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(ev[4]["choices"][0]["delta"].empty());
  EXPECT_TRUE(ev[5]["choices"].empty());
  EXPECT_EQ(ev[5]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(ev[6], "[DONE]");
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(ev[i]["usage"].is_null());
}

TEST_F(RoutesTest, StreamEventsAreWrittenByTheEngineThreadAsTheyArrive) {
  // Without a flush interval, each token's event is written from inside the engine's callback:
  // nothing is posted, so no I/O thread stands between the sampling and the send.
  auto ex = call("POST", "/v1/completions", {{"prompt", "x"}, {"stream", true}});
  const int head_writes = ex->writes;
  engine_.token('a');
  EXPECT_EQ(ex->writes, head_writes + 1);
  engine_.token('b');
  EXPECT_EQ(ex->writes, head_writes + 2);
  EXPECT_TRUE(ex->posted.empty());
  EXPECT_NE(ex->body.find("\"text\":\"a\""), std::string::npos) << ex->body;
}

TEST_F(RoutesTest, BodyEventsOfOneBusyPeriodAreDrainedTogether) {
  // A body is built on the strand: one drain is posted for the events that arrive before it runs.
  auto ex = call("POST", "/v1/completions", {{"prompt", "x"}});
  engine_.token('a');
  engine_.token('b');
  EXPECT_EQ(ex->posted.size(), 1u);
  ex->run_posted();
  engine_.token('c');
  EXPECT_EQ(ex->posted.size(), 1u);  // the inbox was drained: the next event posts again
}

TEST_F(RoutesTest, FlushIntervalDrainsByTimerWhileEventsKeepComing) {
  make_routes("", std::chrono::microseconds(1000));
  auto ex = call("POST", "/v1/completions", {{"prompt", "x"}, {"stream", true}});
  engine_.token('a');
  ASSERT_EQ(ex->posted.size(), 1u);  // the first event of a quiet stream is posted at once
  ex->run_one();                     // its drain writes "a" and starts the timer
  engine_.token('b');
  engine_.token('c');
  EXPECT_EQ(ex->posted.size(), 1u);  // only the timer: the engine thread posted nothing
  ex->run_one();                     // the timer drains b and c in one write
  EXPECT_EQ(ex->writes, 2);
  ex->run_posted();  // the next timer finds nothing: the stream is quiet again
  engine_.token('d', FinishReason::kLength);
  EXPECT_EQ(ex->posted.size(), 1u);
  ex->run_posted();
  EXPECT_TRUE(ex->ended);
  std::string text;
  for (const auto& e : ex->events())
    if (e.is_object() && !e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "abcd");
}

TEST_F(RoutesTest, CompletionStreamStartsWithTheFirstText) {
  auto ex = call("POST", "/v1/completions",
                 {{"prompt", {7, 8}}, {"stream", true}, {"return_token_ids", true}});
  EXPECT_TRUE(ex->body.find("data: ") == std::string::npos);  // nothing before the first token
  engine_.token('a');
  engine_.token('b', FinishReason::kLength);
  ex->run_posted();
  const auto ev = ex->events();
  ASSERT_EQ(ev.size(), 4u) << ex->body;
  EXPECT_EQ(ev[0]["choices"][0]["text"], "a");
  EXPECT_EQ(ev[0]["prompt_token_ids"], json({7, 8}));
  EXPECT_FALSE(ev[1].contains("prompt_token_ids"));
  EXPECT_EQ(ev[2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(ev[3], "[DONE]");
}

TEST_F(RoutesTest, StopStringFinishesAndCancelsTheEngineRequest) {
  auto ex = call("POST", "/v1/completions",
                 {{"prompt", "x"}, {"stop", "XY"}, {"stream", true}, {"max_tokens", 50}});
  for (char c : std::string("abXYcd")) engine_.token(c);
  ex->run_posted();
  EXPECT_TRUE(engine_.handles[0]->cancelled());
  const auto ev = ex->events();
  std::string text;
  for (const auto& e : ev)
    if (e.is_object() && !e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "ab");
  EXPECT_EQ(ev[ev.size() - 2]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(ev[ev.size() - 2]["choices"][0]["stop_reason"], "XY");
  EXPECT_EQ(ev.back(), "[DONE]");
  // The engine's own ending afterwards changes nothing.
  const std::string before = ex->body;
  engine_.finish(FinishReason::kCancelled);
  ex->run_posted();
  EXPECT_EQ(ex->body, before);
}

TEST_F(RoutesTest, ClientLeavingCancelsTheEngineRequest) {
  auto ex = call("POST", "/v1/completions", {{"prompt", "x"}, {"stream", true}});
  engine_.token('a');
  ex->run_posted();
  ASSERT_TRUE(ex->on_abandon_fn);
  ex->client_leaves();
  EXPECT_TRUE(engine_.handles[0]->cancelled());
  engine_.finish(FinishReason::kCancelled);
  ex->run_posted();  // nothing to write to anymore, and no crash
  EXPECT_NE(metrics_.render(engine_.stats()).find("finish_reason=\"abort\"} 1"), std::string::npos);
}

TEST_F(RoutesTest, TimeoutIs504OrAnErrorEvent) {
  auto ex = call("POST", "/v1/completions", {{"prompt", "x"}});
  engine_.token('a');
  engine_.finish(FinishReason::kTimeout);
  ex->run_posted();
  EXPECT_EQ(ex->response->status, 504);
  EXPECT_EQ(ex->json_body()["error"]["code"], "request_timeout");

  auto st = call("POST", "/v1/completions", {{"prompt", "x"}, {"stream", true}});
  engine_.token('a');
  engine_.finish(FinishReason::kTimeout);
  st->run_posted();
  const auto ev = st->events();
  EXPECT_EQ(ev[ev.size() - 2]["error"]["code"], "request_timeout");
  EXPECT_EQ(ev.back(), "[DONE]");
}

TEST_F(RoutesTest, EngineErrorAndShutdownAreReported) {
  auto ex = call("POST", "/v1/completions", {{"prompt", "x"}});
  engine_.finish(FinishReason::kError, "step failed");
  ex->run_posted();
  EXPECT_EQ(ex->response->status, 500);
  EXPECT_NE(ex->response->body.find("step failed"), std::string::npos);
  ex = call("POST", "/v1/completions", {{"prompt", "x"}});
  engine_.finish(FinishReason::kCancelled);
  ex->run_posted();
  EXPECT_EQ(ex->response->status, 503);
}

TEST_F(RoutesTest, CompletionLogprobsAndTokenIds) {
  auto ex = call("POST", "/v1/completions",
                 {{"prompt", {1, 2, 3}}, {"logprobs", 1}, {"return_token_ids", true}});
  EXPECT_EQ(engine_.requests[0].prompt, (std::vector<int32_t>{1, 2, 3}));
  engine_.token('o');
  engine_.token('k', FinishReason::kLength);
  ex->run_posted();
  const json r = ex->json_body();
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "ok");
  EXPECT_EQ(r["choices"][0]["token_ids"], json({'o', 'k'}));
  EXPECT_EQ(r["prompt_token_ids"], json({1, 2, 3}));
  const json& lp = r["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"o", "k"}));
  EXPECT_EQ(lp["text_offset"], json({0, 1}));
}

TEST_F(RoutesTest, TokenizeAndDetokenize) {
  auto ex = call("POST", "/tokenize", {{"prompt", "hi"}});
  EXPECT_EQ(ex->json_body()["tokens"], json({258, 260, 104, 105}));
  EXPECT_EQ(ex->json_body()["count"], 4);
  ex = call("POST", "/tokenize", {{"messages", chat_body()["messages"]}});
  const auto expected = ByteTokenizer().encode(parse_chat_messages(chat_body()).render());
  EXPECT_EQ(ex->json_body()["tokens"], json(expected));
  EXPECT_EQ(ex->json_body()["count"], expected.size());
  ex = call("POST", "/detokenize", {{"tokens", {104, 105}}});
  EXPECT_EQ(ex->json_body()["prompt"], "hi");
  EXPECT_EQ(call("POST", "/tokenize", json::object())->response->status, 400);
}

// Issue 14: a tool call's arguments string nested 20,000 deep crashed the chat template's recursive
// rendering (a SIGSEGV of the whole server from one 40 KB request, /tokenize needing no key). The
// string is parsed under the body's limits: a 400 naming the field and the limit, and the routes
// keep serving.
TEST_F(RoutesTest, DeeplyNestedToolArgumentsAre400AndServingGoesOn) {
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  const json call_of_f = {
      {"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", deep}}}};
  const json messages = json::array(
      {{{"role", "user"}, {"content", "hi"}},
       {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call_of_f})}}});
  for (const char* path : {"/tokenize", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    const auto ex = call("POST", path, chat_body({{"messages", messages}}));
    ASSERT_TRUE(ex->response.has_value());
    EXPECT_EQ(ex->response->status, 400);
    const std::string message = ex->json_body()["error"]["message"];
    EXPECT_NE(message.find("messages[1].tool_calls[0].function.arguments"), std::string::npos)
        << message;
    EXPECT_NE(message.find("nested deeper than 64 levels"), std::string::npos) << message;
  }
  EXPECT_TRUE(engine_.requests.empty());
  EXPECT_EQ(call("POST", "/tokenize", {{"prompt", "hi"}})->response->status, 200);
  call("POST", "/v1/chat/completions", chat_body());
  EXPECT_EQ(engine_.requests.size(), 1u) << "a well-formed chat still reaches the engine";
}

// Issue 20: tool calls parsed out of the content, as a message and as stream deltas.
TEST_F(RoutesTest, ToolCallsBecomeToolCallsWithFinishReasonToolCalls) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "add",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])");
  const std::string out =
      "Sum.<tool_call>add<arg_key>a</arg_key><arg_value>2</arg_value></tool_call>";
  RouteOptions o = routes_->options();  // the tools' preamble needs a longer context
  o.model.max_seq_len = o.kv_pool_tokens = 4096;
  routes_ = std::make_unique<OpenAiRoutes>(o, engine_, *codec_, metrics_);
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream);
    auto ex = call("POST", "/v1/chat/completions",
                   chat_body({{"tools", tools},
                              {"stream", stream},
                              {"max_tokens", 100},
                              {"chat_template_kwargs", {{"enable_thinking", false}}}}));
    ASSERT_EQ(ex->stream_status == 200 || !ex->response, true) << ex->response->body;
    for (char c : out) engine_.token(c);
    engine_.token(ByteTokenizer::kUser, FinishReason::kStop);
    ex->run_posted();
    json calls = json::array();
    std::string content, finish;
    if (!stream) {
      const json c = ex->json_body()["choices"][0];
      content = c["message"]["content"];
      calls = c["message"]["tool_calls"];
      finish = c["finish_reason"];
    } else {
      for (const json& e : ex->events()) {
        if (!e.is_object() || e["choices"].empty()) continue;
        const json& c = e["choices"][0];
        if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
        if (c["delta"].contains("tool_calls"))
          for (const json& t : c["delta"]["tool_calls"]) calls.push_back(t);
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
      }
    }
    EXPECT_EQ(content, "Sum.");
    EXPECT_EQ(finish, "tool_calls");
    ASSERT_EQ(calls.size(), 1u) << calls.dump();
    EXPECT_EQ(calls[0]["type"], "function");
    EXPECT_EQ(calls[0]["function"]["name"], "add");
    EXPECT_EQ(calls[0]["function"]["arguments"], R"({"a":2})");
    EXPECT_EQ(calls[0]["id"].get<std::string>().rfind("call_", 0), 0u);
    EXPECT_EQ(calls[0].contains("index"), stream);
  }
}

TEST_F(RoutesTest, ToolChoiceNoneRendersNoToolsAndParsesNothing) {
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  auto ex = call("POST", "/v1/chat/completions",
                 chat_body({{"tools", tools}, {"tool_choice", "none"}, {"max_tokens", 100}}));
  ASSERT_EQ(engine_.requests.size(), 1u);
  const std::string prompt = ByteTokenizer().decode(engine_.requests[0].prompt);
  EXPECT_EQ(prompt.find("# Tools"), std::string::npos);
  engine_.token(ByteTokenizer::kEndThink);
  for (char c : std::string("<tool_call>f</tool_call>")) engine_.token(c);
  engine_.token(ByteTokenizer::kUser, FinishReason::kStop);
  ex->run_posted();
  const json c = ex->json_body()["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_FALSE(c["message"].contains("tool_calls"));
}

TEST_F(RoutesTest, ConstraintsAreCompiledOrRefusedNeverIgnored) {
  // Without a compiler the engine applies no constraint: every way of asking is a 400 naming it.
  const json schema = {{"type", "object"}};
  const std::vector<std::pair<json, std::string>> asks = {
      {{{"response_format", {{"type", "json_object"}}}}, "response_format"},
      {{{"guided_json", schema}}, "guided_json"},
      {{{"structured_outputs", {{"choice", {"a", "b"}}}}}, "structured_outputs"},
  };
  for (const auto& [extra, field] : asks) {
    auto ex = call("POST", "/v1/chat/completions", chat_body(extra));
    ASSERT_EQ(ex->response->status, 400) << extra.dump();
    EXPECT_EQ(ex->json_body()["error"]["param"], field);
  }
  EXPECT_TRUE(engine_.requests.empty());
  // With one, the grammar rides on the request; the compiler's refusal is a 400 naming the field.
  RouteOptions o = routes_->options();
  OutputConstraint seen;
  o.compile_constraint =
      [&seen](const OutputConstraint& c) -> std::shared_ptr<const CompiledGrammar> {
    if (c.kind == OutputConstraint::Kind::kJsonSchema && c.schema.contains("pattern"))
      throw Error(ErrorKind::kInvalidArgument, "$.pattern: keyword not supported");
    seen = c;
    return nullptr;
  };
  routes_ = std::make_unique<OpenAiRoutes>(o, engine_, *codec_, metrics_);
  call("POST", "/v1/chat/completions", chat_body({{"guided_json", schema}}));
  ASSERT_EQ(engine_.requests.size(), 1u);
  EXPECT_EQ(seen.kind, OutputConstraint::Kind::kJsonSchema);
  EXPECT_TRUE(seen.after_reasoning) << "thinking is on: the schema holds after </think>";
  EXPECT_EQ(engine_.requests[0].constraint.schema, schema);
  auto ex = call("POST", "/v1/chat/completions",
                 chat_body({{"response_format",
                             {{"type", "json_schema"},
                              {"json_schema", {{"name", "x"}, {"schema", {{"pattern", "a"}}}}}}}}));
  EXPECT_EQ(ex->response->status, 400);
  EXPECT_EQ(ex->json_body()["error"]["param"], "response_format");
  EXPECT_NE(ex->response->body.find("$.pattern"), std::string::npos);
}

TEST_F(RoutesTest, VersionAndReasoningAliasAndContinuousUsage) {
  const json v = call("GET", "/version")->json_body();
  EXPECT_FALSE(v["version"].get<std::string>().empty());
  EXPECT_TRUE(v.contains("commit"));
  auto ex = call("POST", "/v1/chat/completions", chat_body());
  engine_.token('h');
  engine_.token(ByteTokenizer::kEndThink);
  engine_.token('o', FinishReason::kLength);
  ex->run_posted();
  const json m = ex->json_body()["choices"][0]["message"];
  EXPECT_EQ(m["reasoning"], "h");
  EXPECT_EQ(m["reasoning_content"], "h");
  ex = call(
      "POST", "/v1/chat/completions",
      chat_body({{"stream", true},
                 {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}}}));
  engine_.token('a');
  engine_.token('b', FinishReason::kLength);
  ex->run_posted();
  const auto ev = ex->events();
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[1]["usage"]["completion_tokens"], 1) << ev[1].dump();
  EXPECT_EQ(ev[1]["choices"][0]["delta"]["reasoning"], "a");
  EXPECT_EQ(ev[2]["usage"]["completion_tokens"], 2);
}

}  // namespace
}  // namespace sparkglm::server
