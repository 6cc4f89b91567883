// The routes and a generation's answer, with a scripted engine and an in-memory exchange
// (tests/support/routes_fixture.h): what a client receives for each kind of engine event, without
// HTTP or a model.
#include "engine/server/openai_routes.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "tests/support/routes_fixture.h"

namespace sparkglm::server {
namespace {

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
  // The scheme name is case-insensitive (RFC 9110); the key is not, and it needs its space.
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "bearer k3y")->response->status, 200);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "BEARER  k3y")->response->status, 200);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "Bearer K3Y")->response->status, 401);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "Bearerk3y")->response->status, 401);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "Basic k3y")->response->status, 401);
  EXPECT_EQ(call("GET", "/v1/models", nullptr, "Bearer ")->response->status, 401);
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

}  // namespace
}  // namespace sparkglm::server
