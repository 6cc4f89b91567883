// One streaming request: every field filled from a real tinyglm-micro server, timestamps taken as
// bytes arrive (a scripted socket), and every kind of failure recorded, never thrown or dropped.
#include "harness/sse_client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "engine/core/sha256.h"
#include "harness/server_api.h"
#include "local_endpoints.h"

namespace sparkglm::harness {
namespace {

using nlohmann::json;
using testing::kSseHead;
using testing::LoopbackSocket;
using testing::ScriptedServer;
using Clock = std::chrono::steady_clock;

const json kMessages = json::array({{{"role", "user"}, {"content", "Count to ten."}}});

RequestSpec chat_spec(int max_tokens) {
  RequestSpec s;
  s.workload = "harness-test";
  s.case_id = "chat";
  s.index = 2;
  s.repetition = 1;
  s.marker = "[m2]";
  s.path = "/v1/chat/completions";
  s.body = {{"messages", kMessages},
            {"max_tokens", max_tokens},
            {"ignore_eos", true},
            {"temperature", 0},
            {"chat_template_kwargs", {{"enable_thinking", false}}}};
  s.timeout_s = 60;
  return s;
}

std::string joined(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// What every ok record must hold, whatever the request.
void expect_consistent(const RequestRecord& r, int32_t tokens) {
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.completion_tokens, tokens);
  EXPECT_EQ(r.token_ids.size(), size_t(tokens));
  EXPECT_GT(r.prompt_tokens, 0);
  EXPECT_EQ(r.output_sha256, sha256_hex(r.output_text));
  EXPECT_EQ(r.reasoning_sha256, sha256_hex(r.reasoning_text));
  EXPECT_EQ(r.token_ids_sha256, sha256_hex(joined(r.token_ids)));
  ASSERT_FALSE(r.output_event_s.empty());
  EXPECT_LE(r.output_event_s.size(), size_t(tokens));
  ASSERT_TRUE(r.first_output_s);
  EXPECT_EQ(*r.first_output_s, r.output_event_s.front());
  EXPECT_GE(*r.first_output_s, r.start_s);
  for (size_t i = 1; i < r.output_event_s.size(); ++i)
    EXPECT_GE(r.output_event_s[i], r.output_event_s[i - 1]);
  EXPECT_GE(r.end_s, r.output_event_s.back());
  // Recorded, and positive: the client's cost is measured, whatever its size.
  EXPECT_GT(r.client_overhead_median_s, 0);
  EXPECT_GE(r.client_overhead_max_s, r.client_overhead_median_s);
  // The load thread's whole CPU time covers at least the callback's share of it.
  EXPECT_GT(r.client_thread_cpu_s, 0);
  int64_t events = 0;
  for (int32_t n : r.events_per_read) events += n;
  EXPECT_EQ(events, int64_t(r.output_event_s.size()));
}

TEST(SseClient, ChatStreamFillsEveryField) {
  auto server = testing::start_tiny_server();
  const RequestRecord r =
      stream_request(server->base_url(), chat_spec(24), "candidate", Clock::now());
  expect_consistent(r, 24);
  EXPECT_EQ(r.arm, "candidate");
  EXPECT_EQ(r.workload, "harness-test");
  EXPECT_EQ(r.case_id, "chat");
  EXPECT_EQ(r.repetition, 1);
  EXPECT_EQ(r.index, 2);
  EXPECT_EQ(r.marker, "[m2]");
  EXPECT_EQ(r.prompt_tokens,
            count_chat_tokens(server->base_url(), kMessages,
                              {{"chat_template_kwargs", {{"enable_thinking", false}}}}));
  // Thinking is off, so content is all there is; its first token may carry no text yet.
  EXPECT_EQ(r.reasoning_text, "");
  ASSERT_TRUE(r.first_visible_s);
  EXPECT_GE(*r.first_visible_s, *r.first_output_s);
}

TEST(SseClient, ChatWithThinkingSplitsReasoningFromContent) {
  auto server = testing::start_tiny_server();
  RequestSpec s = chat_spec(24);
  s.body.erase("chat_template_kwargs");
  const RequestRecord r = stream_request(server->base_url(), s, "", Clock::now());
  expect_consistent(r, 24);
  EXPECT_NE(r.reasoning_text, "");  // a random model rarely closes its thinking in 24 tokens
  if (r.first_visible_s) {
    EXPECT_GE(*r.first_visible_s, *r.first_output_s);
  }
}

TEST(SseClient, CompletionStreamFillsEveryFieldAndRepeats) {
  auto server = testing::start_tiny_server();
  RequestSpec s;
  s.case_id = "completion";
  s.path = "/v1/completions";
  s.body = {
      {"prompt", "Once upon a time"}, {"max_tokens", 16}, {"ignore_eos", true}, {"temperature", 0}};
  const auto epoch = Clock::now();
  const RequestRecord a = stream_request(server->base_url(), s, "", epoch);
  const RequestRecord b = stream_request(server->base_url(), s, "", epoch);
  expect_consistent(a, 16);
  EXPECT_EQ(a.prompt_tokens, count_tokens(server->base_url(), "Once upon a time"));
  EXPECT_EQ(a.reasoning_text, "");
  // Byte-level output: the first token may complete no character, so visible text can come later.
  ASSERT_TRUE(a.first_visible_s);
  EXPECT_GE(*a.first_visible_s, *a.first_output_s);
  // Greedy: the same ids twice; and the later request started later on the same epoch.
  EXPECT_EQ(a.token_ids_sha256, b.token_ids_sha256);
  EXPECT_GE(b.start_s, a.end_s);
}

TEST(SseClient, Http400IsAFailedRecordWithTheErrorBody) {
  auto server = testing::start_tiny_server();
  RequestSpec s = chat_spec(8);
  s.body["messages"] = "not a list";
  const RequestRecord r = stream_request(server->base_url(), s, "", Clock::now());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.http_status, 400);
  EXPECT_EQ(r.error.rfind("HTTP 400: {", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("messages"), std::string::npos) << r.error;
  EXPECT_TRUE(r.output_event_s.empty());
  EXPECT_GE(r.end_s, r.start_s);
  EXPECT_EQ(r.case_id, "chat");
}

TEST(SseClient, TimeoutIsAFailedRecord) {
  LoopbackSocket silent;  // accepts connections (the kernel does) and never answers
  ASSERT_EQ(::listen(silent.fd(), 4), 0);
  RequestSpec s = chat_spec(8);
  s.timeout_s = 0.3;
  const RequestRecord r = stream_request(silent.base_url(), s, "", Clock::now());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error.rfind("timeout", 0), 0u) << r.error;
  EXPECT_GE(r.end_s - r.start_s, 0.25);  // it did wait; a lower bound, not a timing
}

TEST(SseClient, ConnectionRefusedIsAFailedRecord) {
  LoopbackSocket closed;  // bound, never listening: connections are refused
  const RequestRecord r = stream_request(closed.base_url(), chat_spec(8), "", Clock::now());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.http_status, 0);
  EXPECT_EQ(r.error.rfind("connection failed", 0), 0u) << r.error;
}

std::string event(const json& j) {
  return "data: " + j.dump() + "\n\n";
}
json text_chunk(const std::string& text, int id) {
  return {{"choices",
           json::array(
               {{{"index", 0}, {"text", text}, {"finish_reason", nullptr}, {"token_ids", {id}}}})}};
}
const json kFinish = {
    {"choices", json::array({{{"index", 0}, {"text", ""}, {"finish_reason", "stop"}}})}};
const json kUsage = {{"choices", json::array()},
                     {"usage",
                      {{"prompt_tokens", 5},
                       {"completion_tokens", 2},
                       {"prompt_tokens_details", {{"cached_tokens", 4}}},
                       {"completion_tokens_details", {{"reasoning_tokens", 0}}}}}};

RequestSpec completion_spec() {
  RequestSpec s;
  s.path = "/v1/completions";
  s.body = {{"prompt", "x"}, {"stream_options", {{"continuous_usage_stats", false}}}};
  s.timeout_s = 30;
  return s;
}

TEST(SseClient, EventsAreTimedWhenTheirLastByteArrives) {
  // The second event is split across two writes 300 ms apart: it is complete only at the second.
  const std::string second = event(text_chunk("b", 66));
  ScriptedServer server({std::string(kSseHead) + event(text_chunk("a", 65)) + second.substr(0, 9),
                         second.substr(9) + event(kFinish) + event(kUsage) + "data: [DONE]\n\n"},
                        std::chrono::milliseconds(300));
  const RequestRecord r = stream_request(server.base_url(), completion_spec(), "", Clock::now());
  EXPECT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.output_event_s.size(), 2u);
  EXPECT_GE(r.output_event_s[1] - r.output_event_s[0], 0.25);
  EXPECT_EQ(r.output_text, "ab");
  EXPECT_EQ(r.token_ids, (std::vector<int32_t>{65, 66}));
  EXPECT_EQ(r.cached_tokens, 4);
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_GE(r.end_s, r.output_event_s[1]);

  // The body went out with streaming forced on, and the caller's other stream options kept.
  const std::string request = server.request();
  const json body = json::parse(request.substr(request.find("\r\n\r\n") + 4));
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["stream_options"]["continuous_usage_stats"], false);
  EXPECT_EQ(body["return_token_ids"], true);
  EXPECT_EQ(body["prompt"], "x");
}

TEST(SseClient, TtftIsKeyedToTheFirstTokenNotTheFirstVisibleText) {
  // The first token's bytes complete no character: it carries an id and no text. 200 ms later
  // the next token brings the text. TTFT starts at the token; TTFV at the text.
  ScriptedServer server({std::string(kSseHead) + event(text_chunk("", 226)),
                         event(text_chunk("\xc3\xa9", 169)) + event(text_chunk("b", 66)) +
                             event(kFinish) + event(kUsage) + "data: [DONE]\n\n"},
                        std::chrono::milliseconds(200));
  const RequestRecord r = stream_request(server.base_url(), completion_spec(), "", Clock::now());
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.output_event_s.size(), 3u);
  ASSERT_TRUE(r.first_output_s && r.first_visible_s);
  EXPECT_EQ(*r.first_output_s, r.output_event_s[0]);
  EXPECT_EQ(*r.first_visible_s, r.output_event_s[1]);
  EXPECT_GE(*r.first_visible_s - *r.first_output_s, 0.15);
  // Delivery: the second write held two output events; the head and the textless token came in
  // the first (which reads they arrive in is the socket's business, so only the totals are fixed).
  int32_t events = 0, most = 0;
  for (int32_t n : r.events_per_read) events += n, most = std::max(most, n);
  EXPECT_EQ(events, 3);
  EXPECT_EQ(most, 2);
}

TEST(SseClient, FirstTokenTimeAgreesWithTheServersOwnTtftAtC1) {
  // One request alone on a fresh server: the server's TTFT histogram sum moves by exactly this
  // request's TTFT (arrival to first token), and the client's first-token time must agree within
  // 1 ms (it adds only the loopback send and the event's write).
  auto server = testing::start_tiny_server();
  RequestSpec s;
  s.path = "/v1/completions";
  s.body = {{"prompt", "Once upon a time there was a"},
            {"max_tokens", 8},
            {"ignore_eos", true},
            {"temperature", 0}};
  s.timeout_s = 60;
  // The server records a request's metrics just after its last event goes out, so a scrape sent
  // the moment the client has [DONE] can still precede them: wait until `requests` are counted.
  const auto ttft_sum_after = [&](int requests) {
    std::map<std::string, double> m;
    for (int i = 0; i < 500; ++i) {
      m = scrape_metrics(server->base_url());
      if (m.at("sparkglm_time_to_first_token_seconds_count") >= requests) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(m.at("sparkglm_time_to_first_token_seconds_count"), requests);
    return m.at("sparkglm_time_to_first_token_seconds_sum");
  };
  stream_request(server->base_url(), s, "", Clock::now());  // warm the server's first-call paths
  constexpr int kAttempts = 10;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const double before = ttft_sum_after(attempt + 1);
    const RequestRecord r = stream_request(server->base_url(), s, "", Clock::now());
    const double served = ttft_sum_after(attempt + 2) - before;
    ASSERT_TRUE(r.ok) << r.error;
    const double client = *r.first_output_s - r.start_s;
    EXPECT_GE(client, served - 1e-4) << "the client saw the token before the server made it?";
    if (std::abs(client - served) < 1e-3) return;
    // A loaded machine can delay an event by a scheduling slice (about 4 ms, seen in CI beside
    // other jobs); a client that reads late does so every time, so ten in a row is a real gap.
    std::printf("attempt %d: client TTFT %.6f s, server TTFT %.6f s\n", attempt, client, served);
  }
  ADD_FAILURE() << "the client's first-token TTFT differed from the server's by 1 ms or more in "
                << kAttempts << " requests";
}

TEST(SseClient, ErrorEventIsAFailedRecord) {
  ScriptedServer server(
      {std::string(kSseHead) + event(text_chunk("a", 65)) +
       event({{"error", {{"message", "the engine failed"}}}}) + "data: [DONE]\n\n"},
      std::chrono::milliseconds(0));
  const RequestRecord r = stream_request(server.base_url(), completion_spec(), "", Clock::now());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.http_status, 200);
  EXPECT_NE(r.error.find("the engine failed"), std::string::npos) << r.error;
  EXPECT_EQ(r.output_text, "a");  // what came before the error is kept
}

TEST(SseClient, TruncatedStreamsAreFailedRecords) {
  const std::string full = std::string(kSseHead) + event(text_chunk("a", 65)) + event(kFinish);
  struct Case {
    std::string stream, why;
  };
  for (const Case& c :
       {Case{full + event(kUsage), "[DONE]"}, Case{full + "data: [DONE]\n\n", "usage"},
        Case{
            std::string(kSseHead) + event(text_chunk("a", 65)) + event(kUsage) + "data: [DONE]\n\n",
            "finish_reason"},
        Case{full + event(kUsage) + "data: [DONE]\n\ndata: {}\n\n", "after [DONE]"},
        Case{full + event(kUsage) + "data: [DONE]\n\ndata: {", "inside an event"},
        Case{full + "data: {not json\n\n", "malformed SSE event"}}) {
    ScriptedServer server({c.stream}, std::chrono::milliseconds(0));
    const RequestRecord r = stream_request(server.base_url(), completion_spec(), "", Clock::now());
    EXPECT_FALSE(r.ok) << c.why;
    EXPECT_NE(r.error.find(c.why), std::string::npos) << r.error;
  }
}

TEST(SseClient, IllFormedUtf8FromTheServerFailsTheRecordAndTheRecordStaysJson) {
  // A server is not trusted to send UTF-8: its bytes reach the record's error, and a record that
  // nlohmann cannot write would end the whole run when its requests.jsonl is written.
  const std::string bad = "caf\xC3 \xFF\xFE";
  struct Case {
    std::string stream, why;
  };
  for (const Case& c :
       {Case{std::string(kSseHead) + "data: {\"choices\": [{\"text\": \"" + bad + "\"}]}\n\n",
             "malformed SSE event"},
        Case{"HTTP/1.1 500 Internal Server Error\r\nContent-Length: " + std::to_string(bad.size()) +
                 "\r\nConnection: close\r\n\r\n" + bad,
             "HTTP 500"}}) {
    ScriptedServer server({c.stream}, std::chrono::milliseconds(0));
    const RequestRecord r = stream_request(server.base_url(), completion_spec(), "", Clock::now());
    EXPECT_FALSE(r.ok) << c.why;
    EXPECT_NE(r.error.find(c.why), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD stands for the bad bytes";
    EXPECT_NO_THROW(to_json(r).dump()) << c.why;
  }
}

// Tool calls come as chat deltas, each call whole (docs/api.md): the record keeps each function's
// name and arguments in order; a call without them fails the request, naming it.
TEST(SseClient, ToolCallDeltasAreRecorded) {
  const auto call = [](int index, const std::string& name, const std::string& args) {
    return json{
        {"choices",
         json::array({{{"index", 0},
                       {"delta",
                        {{"tool_calls",
                          json::array({{{"index", index},
                                        {"id", "call_" + std::to_string(index)},
                                        {"type", "function"},
                                        {"function", {{"name", name}, {"arguments", args}}}}})}}},
                       {"finish_reason", nullptr},
                       {"token_ids", {70 + index}}}})}};
  };
  const json finish = {
      {"choices",
       json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "tool_calls"}}})}};
  ScriptedServer server({std::string(kSseHead) + event(call(0, "add_numbers", R"({"x":1,"y":2})")) +
                         event(call(1, "lookup_order", R"({"order_id":"A-1"})")) + event(finish) +
                         event(kUsage) + "data: [DONE]\n\n"},
                        std::chrono::milliseconds(0));
  RequestSpec spec = completion_spec();
  spec.path = "/v1/chat/completions";
  const RequestRecord r = stream_request(server.base_url(), spec, "", Clock::now());
  EXPECT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "add_numbers");
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"x":1,"y":2})");
  EXPECT_EQ(r.tool_calls[1].name, "lookup_order");
  EXPECT_EQ(r.finish_reason, "tool_calls");
  EXPECT_EQ(r.output_text, "");

  json nameless = call(0, "x", "{}");
  nameless["choices"][0]["delta"]["tool_calls"][0]["function"].erase("name");
  ScriptedServer bad({std::string(kSseHead) + event(nameless) + event(finish) + event(kUsage) +
                      "data: [DONE]\n\n"},
                     std::chrono::milliseconds(0));
  const RequestRecord b = stream_request(bad.base_url(), spec, "", Clock::now());
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.error.find("a tool call without a function name and arguments"), std::string::npos)
      << b.error;
}

// A server under test is not trusted: a count or token id that is negative, fractional or past
// 32 bits fails the request, naming the value, where a conversion would record it as observed.
TEST(SseClient, UsageCountsAndTokenIdsOutOfRangeAreFailedRecords) {
  struct Case {
    std::string stream, why;
  };
  json negative = kUsage, huge = kUsage, fraction = kUsage;
  negative["usage"]["prompt_tokens"] = -5;
  huge["usage"]["completion_tokens"] = 18446744073709551615ull;
  fraction["usage"]["prompt_tokens_details"]["cached_tokens"] = 1e20;
  const std::string head = std::string(kSseHead) + event(text_chunk("a", 65)) + event(kFinish);
  for (const Case& c :
       {Case{head + event(negative) + "data: [DONE]\n\n", "usage prompt_tokens is not a count: -5"},
        Case{head + event(huge) + "data: [DONE]\n\n",
             "usage completion_tokens is not a count: 18446744073709551615"},
        Case{head + event(fraction) + "data: [DONE]\n\n", "usage cached_tokens is not a count"},
        Case{std::string(kSseHead) + event(text_chunk("a", -1)) + event(kFinish) + event(kUsage) +
                 "data: [DONE]\n\n",
             "token id -1 is not a 32-bit token id"}}) {
    ScriptedServer server({c.stream}, std::chrono::milliseconds(0));
    const RequestRecord r = stream_request(server.base_url(), completion_spec(), "", Clock::now());
    EXPECT_FALSE(r.ok) << c.why;
    EXPECT_NE(r.error.find(c.why), std::string::npos) << r.error;
    EXPECT_GE(r.prompt_tokens, 0);
    EXPECT_GE(r.completion_tokens, 0);
    EXPECT_GE(r.cached_tokens, 0);
  }
}

}  // namespace
}  // namespace sparkglm::harness
