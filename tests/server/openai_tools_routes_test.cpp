// Tool calls, tool_choice, output constraints and the API-parity fields through the routes, with
// the scripted engine and in-memory exchange of tests/support/routes_fixture.h.
#include "engine/server/openai_routes.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/support/routes_fixture.h"

namespace sparkglm::server {
namespace {

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
  for (const std::string path : {"/tokenize", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    // /tokenize reads messages and the template's fields only, not a chat's sampling fields.
    const json body =
        path == "/tokenize" ? json{{"messages", messages}} : chat_body({{"messages", messages}});
    const auto ex = call("POST", path, body);
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
