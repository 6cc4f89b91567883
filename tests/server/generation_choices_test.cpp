// `n` > 1 through the routes (issue 20): n engine sequences per request, each answered as its own
// choice, with the scripted engine and in-memory exchange of tests/support/routes_fixture.h.
#include "engine/server/generation_choice.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tests/support/routes_fixture.h"

namespace sparkglm::server {
namespace {

// The text each choice index streamed, and its finish_reason ("" while none came).
struct StreamedChoices {
  std::vector<std::string> text, finish;
};

StreamedChoices collect(const std::vector<json>& events, size_t n) {
  StreamedChoices s{std::vector<std::string>(n), std::vector<std::string>(n)};
  for (const json& e : events) {
    if (!e.is_object()) continue;
    for (const json& c : e["choices"]) {
      const size_t i = c["index"];
      const json& d = c.contains("delta") ? c["delta"] : c;
      const char* key = c.contains("delta") ? "content" : "text";
      if (d.contains(key)) s.text.at(i) += d[key].get<std::string>();
      if (!c["finish_reason"].is_null()) s.finish.at(i) = c["finish_reason"];
    }
  }
  return s;
}

TEST(ChoiceSeed, ChoiceZeroKeepsTheSeedAndTheOthersDiffer) {
  EXPECT_EQ(choice_seed(42, 0), 42u);
  std::set<uint64_t> seen;
  for (uint64_t seed : {uint64_t(0), uint64_t(42), ~uint64_t(0)})
    for (int i = 0; i < 16; ++i) seen.insert(choice_seed(seed, i));
  EXPECT_EQ(seen.size(), 48u);
  // SplitMix64's first output for state 0, as its reference implementation gives it.
  EXPECT_EQ(choice_seed(0, 1), 0xe220a8397b1dcdafull);
}

TEST_F(RoutesTest, NChoicesAreNSequencesWithTheSamePromptAndDerivedSeeds) {
  call("POST", "/v1/completions", {{"prompt", "hi"}, {"n", 3}, {"seed", 42}, {"max_tokens", 4}});
  ASSERT_EQ(engine_.requests.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(engine_.requests[i].prompt, engine_.requests[0].prompt);
    EXPECT_EQ(engine_.requests[i].sampling.max_tokens, 4);
    ASSERT_TRUE(engine_.requests[i].sampling.seed.has_value());
    EXPECT_EQ(*engine_.requests[i].sampling.seed, choice_seed(42, int(i)));
  }
  call("POST", "/v1/completions", {{"prompt", "hi"}, {"n", 2}, {"max_tokens", 4}});
  ASSERT_EQ(engine_.requests.size(), 5u);
  EXPECT_FALSE(engine_.requests[3].sampling.seed.has_value());  // the scheduler's own, each
  EXPECT_FALSE(engine_.requests[4].sampling.seed.has_value());
}

TEST_F(RoutesTest, BlockingAnswerWaitsForEveryChoiceAndSumsCompletionTokens) {
  auto ex = call(
      "POST", "/v1/chat/completions",
      chat_body(
          {{"n", 2}, {"logprobs", true}, {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  ASSERT_EQ(engine_.requests.size(), 2u);
  engine_.token_to(1, 'b');
  engine_.token_to(1, 'c', FinishReason::kLength);
  ex->run_posted();
  EXPECT_FALSE(ex->response) << "choice 0 is still running";
  engine_.token_to(0, 'a');
  engine_.token_to(0, ByteTokenizer::kUser, FinishReason::kStop);
  ex->run_posted();
  ASSERT_TRUE(ex->response);
  const json r = ex->json_body();
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_EQ(r["choices"][0]["index"], 0);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "a");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["choices"][0]["logprobs"]["content"].size(), 2u);
  EXPECT_EQ(r["choices"][1]["index"], 1);
  EXPECT_EQ(r["choices"][1]["message"]["content"], "bc");
  EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][1]["logprobs"]["content"].size(), 2u);
  EXPECT_EQ(r["usage"]["prompt_tokens"], int(engine_.requests[0].prompt.size()));  // once
  EXPECT_EQ(r["usage"]["completion_tokens"], 4);
  EXPECT_EQ(r["usage"]["total_tokens"], int(engine_.requests[0].prompt.size()) + 4);
}

TEST_F(RoutesTest, StreamCarriesEachChoiceIndexAndItsOwnFinish) {
  auto ex = call("POST", "/v1/completions",
                 {{"prompt", "hi"},
                  {"n", 2},
                  {"max_tokens", 4},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(ex->stream_status, 200);
  engine_.token_to(0, 'x');
  engine_.token_to(1, 'y');
  engine_.token_to(1, 'z', FinishReason::kLength);
  ex->run_posted();
  StreamedChoices s = collect(ex->events(), 2);
  EXPECT_EQ(s.finish[1], "length");
  EXPECT_EQ(s.finish[0], "") << "choice 0 runs on";
  EXPECT_FALSE(ex->ended);
  engine_.token_to(0, 'w', FinishReason::kLength);
  ex->run_posted();
  const std::vector<json> events = ex->events();
  s = collect(events, 2);
  EXPECT_EQ(s.text[0], "xw");
  EXPECT_EQ(s.text[1], "yz");
  EXPECT_EQ(s.finish[0], "length");
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), json("[DONE]"));
  const json& usage_chunk = events[events.size() - 2];
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 4);
  EXPECT_TRUE(ex->ended);
}

TEST_F(RoutesTest, ChatStreamOpensEveryChoiceWithItsRole) {
  auto ex = call("POST", "/v1/chat/completions", chat_body({{"n", 3}, {"stream", true}}));
  const std::vector<json> events = ex->events();
  ASSERT_EQ(events.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(events[i]["choices"][0]["index"], i);
    EXPECT_EQ(events[i]["choices"][0]["delta"]["role"], "assistant");
  }
}

TEST_F(RoutesTest, StopStringEndsOnlyItsOwnChoice) {
  auto ex = call("POST", "/v1/completions",
                 {{"prompt", "hi"}, {"n", 2}, {"max_tokens", 8}, {"stop", "q"}});
  engine_.token_to(0, 'a');
  engine_.token_to(0, 'q');
  ex->run_posted();  // a body's events are handled on the strand
  EXPECT_TRUE(engine_.handles[0]->cancelled()) << "the engine does not match stop strings";
  EXPECT_FALSE(engine_.handles[1]->cancelled());
  engine_.finish_to(0, FinishReason::kCancelled);  // the engine's answer to the cancellation
  engine_.token_to(1, 'b', FinishReason::kLength);
  ex->run_posted();
  ASSERT_TRUE(ex->response);
  const json r = ex->json_body();
  EXPECT_EQ(r["choices"][0]["text"], "a");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["choices"][0]["stop_reason"], "q");
  EXPECT_EQ(r["choices"][1]["text"], "b");
  EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
}

TEST_F(RoutesTest, ToolCallsArePerChoice) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "add",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])");
  RouteOptions o = routes_->options();  // the tools' preamble needs a longer context
  o.model.max_seq_len = o.kv_pool_tokens = 4096;
  routes_ = std::make_unique<OpenAiRoutes>(o, engine_, *codec_, metrics_);
  auto ex = call("POST", "/v1/chat/completions",
                 chat_body({{"tools", tools},
                            {"n", 2},
                            {"max_tokens", 100},
                            {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  for (char c : std::string("<tool_call>add<arg_key>a</arg_key><arg_value>2</arg_value>"
                            "</tool_call>"))
    engine_.token_to(1, c);
  engine_.token_to(1, ByteTokenizer::kUser, FinishReason::kStop);
  engine_.token_to(0, 'n');
  engine_.token_to(0, ByteTokenizer::kUser, FinishReason::kStop);
  ex->run_posted();
  const json r = ex->json_body();
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "n");
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(r["choices"][1]["finish_reason"], "tool_calls");
  ASSERT_EQ(r["choices"][1]["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(r["choices"][1]["message"]["tool_calls"][0]["function"]["arguments"], R"({"a":2})");
}

TEST_F(RoutesTest, OneChoiceFailingFailsTheCallAndCancelsTheOthers) {
  auto ex = call("POST", "/v1/completions", {{"prompt", "hi"}, {"n", 3}, {"max_tokens", 8}});
  engine_.token_to(0, 'a');
  engine_.finish_to(2, FinishReason::kError, "boom");
  ex->run_posted();
  ASSERT_TRUE(ex->response);
  EXPECT_EQ(ex->response->status, 500);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(engine_.handles[i]->cancelled()) << i;
}

TEST_F(RoutesTest, ClientLeavingCancelsEveryChoice) {
  auto ex = call("POST", "/v1/chat/completions", chat_body({{"n", 3}, {"stream", true}}));
  engine_.token_to(1, 'a');
  ex->client_leaves();
  ASSERT_EQ(engine_.handles.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(engine_.handles[i]->cancelled()) << i;
}

TEST_F(RoutesTest, NAboveMaxNumSeqsIs400NamingN) {
  make_routes("", std::chrono::microseconds(0), /*max_num_seqs=*/2);
  auto ex = call("POST", "/v1/completions", {{"prompt", "hi"}, {"n", 3}, {"max_tokens", 4}});
  ASSERT_TRUE(ex->response);
  EXPECT_EQ(ex->response->status, 400);
  EXPECT_EQ(ex->json_body()["error"]["param"], "n");
  const std::string message = ex->json_body()["error"]["message"];
  EXPECT_NE(message.find("--max-num-seqs 2"), std::string::npos) << message;
  EXPECT_TRUE(engine_.requests.empty());
  call("POST", "/v1/completions", {{"prompt", "hi"}, {"n", 2}, {"max_tokens", 4}});
  EXPECT_EQ(engine_.requests.size(), 2u);
}

TEST_F(RoutesTest, EngineRefusingALaterChoiceCancelsTheEarlierOnes) {
  engine_.refuse_from = 2;
  auto ex = call("POST", "/v1/completions", {{"prompt", "hi"}, {"n", 3}, {"max_tokens", 4}});
  ASSERT_TRUE(ex->response);
  EXPECT_EQ(ex->response->status, 400);
  ASSERT_EQ(engine_.handles.size(), 2u);
  EXPECT_TRUE(engine_.handles[0]->cancelled());
  EXPECT_TRUE(engine_.handles[1]->cancelled());
}

}  // namespace
}  // namespace sparkglm::server
