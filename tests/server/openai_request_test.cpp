#include "engine/server/openai_request.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "engine/server/api_error.h"

namespace sparkglm::server {
namespace {

using nlohmann::json;

const ServedModel kModel{"tinyglm-micro", 2048, 320};

json chat(json extra = json::object()) {
  json body = {{"model", "tinyglm-micro"},
               {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto& [k, v] : extra.items()) body[k] = v;
  return body;
}

// The ApiError a parse throws, or a failure naming the body.
template <typename Parse>
ApiError error_of(Parse parse, const json& body) {
  try {
    parse(body, kModel);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return ApiError::internal("accepted");
}

ApiError chat_error(const json& body) {
  return error_of(parse_chat_completion, body);
}
ApiError completion_error(const json& body) {
  return error_of(parse_completion, body);
}

TEST(ParseJsonBody, MalformedJsonIs400InvalidJson) {
  for (const char* body :
       {"", "{", "{\"a\": }", "nul", "{\"a\": 1} x", "\"\xff\"", "{\"temperature\": 1.2e999}"}) {
    try {
      parse_json_body(body);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.code(), "invalid_json") << body;
    }
  }
}

TEST(ParseJsonBody, NonObjectAndDeepNestingAre400) {
  for (std::string body :
       {std::string("[1]"), std::string("3"), std::string(100, '[') + std::string(100, ']')}) {
    try {
      parse_json_body(body);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
    }
  }
  EXPECT_NO_THROW(parse_json_body("{\"a\": [[[[1]]]]}"));
}

TEST(ParseChatCompletion, MapsSamplingFields) {
  const json body = chat({{"temperature", 0.5},
                          {"top_p", 0.9},
                          {"top_k", 40},
                          {"min_p", 0.05},
                          {"seed", 7},
                          {"presence_penalty", 0.5},
                          {"frequency_penalty", -0.5},
                          {"repetition_penalty", 1.1},
                          {"max_tokens", 100},
                          {"min_tokens", 3},
                          {"ignore_eos", true},
                          {"stop", "END"},
                          {"stop_token_ids", {1, 2}},
                          {"logprobs", true},
                          {"top_logprobs", 5},
                          {"stream", true},
                          {"stream_options", {{"include_usage", true}}},
                          {"return_token_ids", true},
                          {"cache_salt", "tenant-a"},
                          {"disable_mtp", true}});
  const ChatCompletionRequest r = parse_chat_completion(body, kModel);
  const SamplingParams& s = r.fields.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_EQ(r.fields.max_tokens, 100);
  EXPECT_EQ(s.min_tokens, 3);
  EXPECT_TRUE(s.ignore_eos);
  EXPECT_EQ(r.fields.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(s.stop_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.top_logprobs, 5);
  EXPECT_TRUE(r.fields.stream);
  EXPECT_TRUE(r.fields.include_usage);
  EXPECT_TRUE(r.fields.return_token_ids);
  EXPECT_EQ(r.fields.cache_salt, "tenant-a");
  EXPECT_TRUE(r.fields.disable_mtp);
  EXPECT_FALSE(r.add_special_tokens);
  ASSERT_EQ(r.chat.messages.size(), 1u);
}

TEST(ParseChatCompletion, DefaultsAndNullsMeanAbsent) {
  const ChatCompletionRequest r =
      parse_chat_completion(chat({{"temperature", nullptr}, {"stop", nullptr}, {"n", 1}}), kModel);
  EXPECT_FLOAT_EQ(r.fields.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.fields.max_tokens.has_value());
  EXPECT_FALSE(r.fields.stream);
  EXPECT_TRUE(r.fields.stop.empty());
  EXPECT_TRUE(r.fields.skip_special_tokens);
}

TEST(ParseChatCompletion, MaxCompletionTokensWinsOverMaxTokens) {
  const auto r =
      parse_chat_completion(chat({{"max_tokens", 10}, {"max_completion_tokens", 20}}), kModel);
  EXPECT_EQ(r.fields.max_tokens, 20);
}

TEST(ParseChatCompletion, StopAsList) {
  const auto r = parse_chat_completion(chat({{"stop", {"a", "bc"}}}), kModel);
  EXPECT_EQ(r.fields.stop, (std::vector<std::string>{"a", "bc"}));
}

TEST(ParseChatCompletion, WrongTypesNameTheField) {
  const std::vector<std::pair<std::string, json>> cases = {{"temperature", "hot"},
                                                           {"top_p", true},
                                                           {"top_k", 1.5},
                                                           {"seed", "7"},
                                                           {"max_tokens", "10"},
                                                           {"stream", 1},
                                                           {"stop", 3},
                                                           {"stop_token_ids", "1"},
                                                           {"logprobs", "yes"},
                                                           {"top_logprobs", 2.5},
                                                           {"return_token_ids", 0},
                                                           {"cache_salt", 5},
                                                           {"disable_mtp", "yes"},
                                                           {"stream_options", "x"},
                                                           {"ignore_eos", "no"},
                                                           {"model", 1}};
  for (const auto& [field, value] : cases) {
    const ApiError e = chat_error(chat({{field, value}}));
    EXPECT_EQ(e.status(), 400) << field;
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << field << ": " << e.what();
  }
  const ApiError list = chat_error(chat({{"stop", {"a", 1}}}));
  EXPECT_NE(std::string(list.what()).find("stop[1]"), std::string::npos) << list.what();
}

// An empty stop string would match before every token and hold back all of the output: refused,
// alone or in a list, naming where it is.
TEST(ParseChatCompletion, AnEmptyStopStringIsRefusedByPlace) {
  const ApiError alone = chat_error(chat({{"stop", ""}}));
  EXPECT_EQ(alone.status(), 400);
  EXPECT_EQ(alone.param(), "stop");
  const ApiError listed = chat_error(chat({{"stop", {"END", ""}}}));
  EXPECT_EQ(listed.status(), 400);
  EXPECT_EQ(listed.param(), "stop[1]");
  EXPECT_NE(std::string(listed.what()).find("empty"), std::string::npos) << listed.what();
  EXPECT_EQ(parse_chat_completion(chat({{"stop", {"END", " "}}}), kModel).fields.stop.size(), 2u);
}

TEST(ParseChatCompletion, OutOfRangeValuesNameTheField) {
  const std::vector<std::pair<std::string, json>> cases = {
      {"temperature", 2.5},     {"top_p", 0.0},          {"min_p", 1.5}, {"max_tokens", 0},
      {"top_logprobs", 21},     {"presence_penalty", 3}, {"top_k", -2},  {"repetition_penalty", 0},
      {"stop_token_ids", {320}}};
  for (const auto& [field, value] : cases) {
    const ApiError e = chat_error(chat({{field, value}}));
    EXPECT_EQ(e.status(), 400) << field;
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << field << ": " << e.what();
  }
  // top_logprobs needs logprobs.
  EXPECT_EQ(chat_error(chat({{"top_logprobs", 2}})).param(), "top_logprobs");
  // min_tokens above max_tokens.
  EXPECT_EQ(chat_error(chat({{"min_tokens", 5}, {"max_tokens", 2}})).param(), "min_tokens");
}

// An integer too large for 64 bits parses as a float; the client is told the range, not the type.
TEST(ParseChatCompletion, IntegersBeyond64BitsAreOutOfRange) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"seed", "18446744073709551616", "[-9223372036854775808, 9223372036854775807]"},
      {"seed", "-9223372036854775809", "[-9223372036854775808, 9223372036854775807]"},
      {"n", "1000000000000000000000000000000", "[1, 16]"},
      {"max_tokens", "-1e30", "[1, 2147483647]"},
      {"top_k", "1e19", "[-1, 2147483647]"},
  };
  for (const auto& [field, value, range] : cases) {
    const json body = parse_json_body("{" + messages + ", \"" + field + "\": " + value + "}");
    const ApiError e = chat_error(body);
    EXPECT_EQ(e.status(), 400) << value;
    EXPECT_EQ(e.param(), field) << value;
    EXPECT_EQ(e.code(), "invalid_request") << value;
    EXPECT_NE(std::string(e.what()).find("an integer in " + range), std::string::npos)
        << field << " " << value << ": " << e.what();
  }
  const ApiError id = error_of(parse_detokenize, parse_json_body(R"({"tokens": [1, 1e30]})"));
  EXPECT_EQ(id.param(), "tokens[1]");
  EXPECT_NE(std::string(id.what()).find("[0, 319]"), std::string::npos) << id.what();
  // A fraction within the range is a wrong type; its message says the range too.
  const ApiError fraction = chat_error(chat({{"n", 2.5}}));
  EXPECT_EQ(fraction.code(), "invalid_type");
  EXPECT_NE(std::string(fraction.what()).find("[1, 16]"), std::string::npos) << fraction.what();
  EXPECT_EQ(chat_error(chat({{"n", "3"}})).code(), "invalid_type");
}

// A non-negative integer parses as unsigned; a count that starts at 1 must still refuse 0 (n = 0
// once reached the engine as a request with no choices, whose answer never came).
TEST(ParseChatCompletion, ZeroIsBelowCountsThatStartAtOne) {
  for (const char* field : {"n", "max_tokens", "max_completion_tokens"}) {
    const ApiError e = chat_error(chat({{field, 0}}));
    EXPECT_EQ(e.status(), 400) << field;
    EXPECT_EQ(e.param(), field) << e.what();
  }
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"n", 0}}).param(), "n");
  EXPECT_EQ(parse_chat_completion(chat({{"n", 1}}), kModel).fields.n, 1);
}

// Stop strings are searched for after every token and stop ids compared with every token, on the
// thread that serves every stream: one request may not bring 10^5 of them.
TEST(ParseChatCompletion, StopListsAreBounded) {
  EXPECT_EQ(parse_chat_completion(chat({{"stop", std::vector<std::string>(256, "a")}}), kModel)
                .fields.stop.size(),
            256u);
  const ApiError e = chat_error(chat({{"stop", std::vector<std::string>(100000, "a")}}));
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "stop");
  EXPECT_NE(std::string(e.what()).find("100000"), std::string::npos) << e.what();
  EXPECT_EQ(parse_chat_completion(chat({{"stop_token_ids", std::vector<int>(1024, 7)}}), kModel)
                .fields.sampling.stop_token_ids.size(),
            1024u);
  EXPECT_EQ(chat_error(chat({{"stop_token_ids", std::vector<int>(1025, 7)}})).param(),
            "stop_token_ids");
}

TEST(ParseChatCompletion, MessagesErrorsNameThePath) {
  const ApiError e =
      chat_error(json{{"messages", json::array({{{"role", "user"}, {"content", 5}}})}});
  EXPECT_EQ(e.status(), 400);
  EXPECT_NE(std::string(e.what()).find("messages[0]"), std::string::npos) << e.what();
  EXPECT_EQ(chat_error(json{{"model", "tinyglm-micro"}}).status(), 400);
  EXPECT_EQ(chat_error(chat({{"messages", json::array()}})).status(), 400);
}

// OpenAI clients read the field at fault from `param`, not from the message.
TEST(ParseChatCompletion, ChatFieldErrorsNameTheirPathAsParam) {
  const json user = {{"role", "user"}, {"content", "hi"}};
  const json call = {{"id", "c1"}, {"function", {{"name", "f"}, {"arguments", "{"}}}};
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"messages", json::array({user, user, {{"role", "user"}, {"content", 5}}})}},
       "messages[2].content"},
      {{{"messages", json::array({{{"role", "king"}, {"content", "x"}}})}}, "messages[0].role"},
      {{{"messages", json::array({{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}})}},
       "messages[0].content[0].type"},
      {{{"messages", json::array({{{"role", "user"}, {"content", "a"}, {"audio", "x"}}})}},
       "messages[0].audio"},
      {{{"messages", json::array({{{"role", "assistant"}, {"tool_calls", {call}}}})}},
       "messages[0].tool_calls[0].function.arguments"},
      {{{"messages", "hi"}}, "messages"},
      {{{"tools", json::array({tool, {{"type", "function"}, {"function", {{"name", 3}}}}})}},
       "tools[1].function.name"},
      {{{"tools", "f"}}, "tools"},
      {{{"reasoning_effort", "extreme"}}, "reasoning_effort"},
      {{{"chat_template_kwargs", {{"enable_thinking", "no"}}}},
       "chat_template_kwargs.enable_thinking"},
      {{{"chat_template_kwargs", {{"clear_thinking", true}}}},
       "chat_template_kwargs.clear_thinking"},
  };
  for (const auto& [extra, param] : cases) {
    const ApiError e = chat_error(chat(extra));
    EXPECT_EQ(e.status(), 400) << extra.dump();
    EXPECT_EQ(e.param(), param) << extra.dump() << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
  }
  EXPECT_EQ(chat_error(json{{"model", "tinyglm-micro"}}).param(), "messages");
  const json bad_messages = {{"messages", json::array({{{"role", "user"}}})}};
  EXPECT_EQ(error_of(parse_tokenize, bad_messages).param(), "messages[0].content");
}

// A tool's parameters are a JSON Schema: the template renders it and the tool-call grammar and
// parser read its properties. Anything but an object (or null, absent) is a 400.
TEST(ParseChatCompletion, ToolParametersMustBeASchemaObject) {
  auto tools = [](json parameters) {
    return json::array({{{"type", "function"}, {"function", {{"name", "f"}}}},
                        {{"type", "function"},
                         {"function", {{"name", "g"}, {"parameters", std::move(parameters)}}}}});
  };
  for (const json& parameters : {json(5), json("{}"), json::array(), json(true)}) {
    const ApiError e = chat_error(chat({{"tools", tools(parameters)}}));
    EXPECT_EQ(e.status(), 400) << parameters.dump();
    EXPECT_EQ(e.param(), "tools[1].function.parameters") << parameters.dump() << ": " << e.what();
  }
  for (const json& parameters : {json(nullptr), json::object(), json{{"type", "object"}}})
    EXPECT_NO_THROW(parse_chat_completion(chat({{"tools", tools(parameters)}}), kModel))
        << parameters.dump();
}

// A tool call names its tool; two tools of one name would leave its schema ambiguous.
TEST(ParseChatCompletion, DuplicateToolNamesAre400NamingTheName) {
  auto tool = [](const char* name) {
    return json{{"type", "function"}, {"function", {{"name", name}}}};
  };
  const ApiError e = chat_error(
      chat({{"tools", json::array({tool("f"), tool("g"), tool("weather"), tool("g")})}}));
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "tools[3].function.name");
  EXPECT_NE(std::string(e.what()).find("\"g\""), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("tools[1]"), std::string::npos) << e.what();
  EXPECT_NO_THROW(
      parse_chat_completion(chat({{"tools", json::array({tool("f"), tool("g")})}}), kModel));
}

TEST(ParseChatCompletion, UnknownModelIs404) {
  const ApiError e = chat_error(chat({{"model", "gpt-4"}}));
  EXPECT_EQ(e.status(), 404);
  EXPECT_EQ(e.code(), "model_not_found");
  EXPECT_EQ(e.param(), "model");
  EXPECT_NO_THROW(parse_chat_completion(json{{"messages", chat()["messages"]}}, kModel));
}

TEST(ParseChatCompletion, UnsupportedFeaturesAndUnknownFieldsAre400NamingThem) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"n", 17}}, "n"},
      {{{"logit_bias", {{"1", 5}}}}, "logit_bias"},
      {{{"guided_regex", "a+"}}, "guided_regex"},
      {{{"guided_grammar", "x"}}, "guided_grammar"},
      {{{"structured_outputs", {{"regex", "a"}}}}, "structured_outputs.regex"},
      {{{"response_format", {{"type", "yaml"}}}}, "response_format.type"},
      {{{"guided_json", {{"type", "object"}}}, {"guided_choice", {"a"}}}, "guided_json"},
      {{{"tool_choice", "required"}}, "tool_choice"},  // no tools
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}},
       "tool_choice"},
      {{{"frobnicate", true}}, "frobnicate"},
      {{{"functions", json::array()}}, "functions"},
      {{{"stream_options", {{"include_usage", true}, {"x", 1}}}}, "stream_options.x"},
  };
  for (const auto& [extra, param] : cases) {
    const ApiError e = chat_error(chat(extra));
    EXPECT_EQ(e.status(), 400) << extra.dump();
    EXPECT_EQ(e.param(), param) << extra.dump();
  }
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"messages", json::array()}}).param(),
            "messages");
  EXPECT_EQ(chat_error(chat({{"chat_template_kwargs", {{"clear_thinking", true}}}})).status(), 400);
  EXPECT_NO_THROW(parse_chat_completion(
      chat({{"response_format", {{"type", "text"}}}, {"tool_choice", "auto"}, {"user", "u1"}}),
      kModel));
}

TEST(ParseChatCompletion, ConstraintsAndToolChoice) {
  const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
  auto r = parse_chat_completion(
      chat({{"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"name", "s"}, {"schema", schema}, {"strict", true}}}}}}),
      kModel);
  EXPECT_EQ(r.fields.constraint.kind, OutputConstraint::Kind::kJsonSchema);
  EXPECT_EQ(r.fields.constraint.schema, schema);
  EXPECT_TRUE(r.fields.constraint.after_reasoning);
  EXPECT_EQ(r.fields.constraint_field, "response_format");
  r = parse_chat_completion(chat({{"guided_json", schema.dump()}}), kModel);
  EXPECT_EQ(r.fields.constraint.schema, schema) << "a schema in a string";
  r = parse_chat_completion(chat({{"structured_outputs", {{"choice", {"yes", "no"}}}},
                                  {"chat_template_kwargs", {{"enable_thinking", false}}}}),
                            kModel);
  EXPECT_EQ(r.fields.constraint.kind, OutputConstraint::Kind::kChoice);
  EXPECT_EQ(r.fields.constraint.choices, (std::vector<std::string>{"yes", "no"}));
  EXPECT_FALSE(r.fields.constraint.after_reasoning);
  EXPECT_EQ(parse_completion(json{{"prompt", "x"}, {"response_format", {{"type", "json_object"}}}},
                             kModel)
                .fields.constraint.kind,
            OutputConstraint::Kind::kJsonObject);

  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}},
                                  {{"type", "function"}, {"function", {{"name", "g"}}}}});
  r = parse_chat_completion(
      chat({{"tools", tools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "g"}}}}}}),
      kModel);
  EXPECT_EQ(r.tool_choice.mode, ToolChoice::Mode::kNamed);
  EXPECT_EQ(r.fields.constraint.kind, OutputConstraint::Kind::kToolCall);
  ASSERT_EQ(r.fields.constraint.tools.size(), 1u);
  EXPECT_EQ(r.fields.constraint.tools[0]["name"], "g");
  r = parse_chat_completion(chat({{"tools", tools}, {"tool_choice", "required"}}), kModel);
  EXPECT_EQ(r.fields.constraint.tools.size(), 2u);
  EXPECT_TRUE(r.parses_tool_calls());
  r = parse_chat_completion(chat({{"tools", tools}, {"tool_choice", "none"}}), kModel);
  EXPECT_FALSE(r.parses_tool_calls());
  EXPECT_TRUE(r.chat.options.tools.empty());
  EXPECT_EQ(chat_error(chat({{"tools", tools},
                             {"tool_choice", "required"},
                             {"response_format", {{"type", "json_object"}}}}))
                .param(),
            "tool_choice");
}

TEST(ParseChatCompletion, ReasoningInHistoryUnderEitherName) {
  for (const char* name : {"reasoning", "reasoning_content"}) {
    const json messages = json::array({{{"role", "user"}, {"content", "q"}},
                                       {{"role", "assistant"}, {"content", "a"}, {name, "why"}},
                                       {{"role", "user"}, {"content", "q2"}}});
    const auto r = parse_chat_completion(chat({{"messages", messages}}), kModel);
    EXPECT_EQ(r.chat.messages[1].reasoning_content, "why") << name;
  }
  const json both = json::array(
      {{{"role", "assistant"}, {"content", "a"}, {"reasoning", "x"}, {"reasoning_content", "y"}}});
  EXPECT_EQ(chat_error(chat({{"messages", both}})).status(), 400);
  const json odd = json::array({{{"role", "user"}, {"content", "a"}, {"audio", "x"}}});
  EXPECT_EQ(chat_error(chat({{"messages", odd}})).status(), 400);
}

TEST(ParseChatCompletion, ThinkingSwitches) {
  auto r =
      parse_chat_completion(chat({{"chat_template_kwargs", {{"enable_thinking", false}}}}), kModel);
  EXPECT_FALSE(thinking_enabled(r.chat.options));
  r = parse_chat_completion(chat({{"reasoning_effort", "none"}}), kModel);
  EXPECT_FALSE(thinking_enabled(r.chat.options));
  r = parse_chat_completion(chat(), kModel);
  EXPECT_TRUE(thinking_enabled(r.chat.options));
}

TEST(ParseCompletion, PromptShapes) {
  auto r = parse_completion(json{{"prompt", "hello"}}, kModel);
  EXPECT_EQ(r.prompt_text, "hello");
  EXPECT_TRUE(r.add_special_tokens);
  r = parse_completion(json{{"prompt", {"hello"}}}, kModel);
  EXPECT_EQ(r.prompt_text, "hello");
  r = parse_completion(json{{"prompt", {1, 2, 3}}, {"add_special_tokens", false}}, kModel);
  EXPECT_FALSE(r.prompt_text.has_value());
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.add_special_tokens);
  r = parse_completion(json{{"prompt", {{4, 5}}}}, kModel);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{4, 5}));
}

TEST(ParseCompletion, DisableMtpTurnsSpeculationOffForTheRequest) {
  EXPECT_TRUE(
      parse_completion(json{{"prompt", "x"}, {"disable_mtp", true}}, kModel).fields.disable_mtp);
  EXPECT_FALSE(parse_completion(json{{"prompt", "x"}}, kModel).fields.disable_mtp);
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"disable_mtp", 1}}).param(), "disable_mtp");
}

TEST(ParseCompletion, BadPromptsAre400) {
  EXPECT_EQ(completion_error(json::object()).param(), "prompt");
  EXPECT_EQ(completion_error(json{{"prompt", 5}}).status(), 400);
  EXPECT_EQ(completion_error(json{{"prompt", {"a", "b"}}}).status(), 400);  // batches
  EXPECT_EQ(completion_error(json{{"prompt", json::array()}}).status(), 400);
  const ApiError e = completion_error(json{{"prompt", {1, 320}}});
  EXPECT_NE(std::string(e.what()).find("prompt[1]"), std::string::npos) << e.what();
  EXPECT_EQ(completion_error(json{{"prompt", {1, -1}}}).status(), 400);
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"echo", true}}).status(), 400);
}

// Token-id arrays are bounded by the context before any id is read: a 60 MB body of ids once took
// a request worker most of a minute.
TEST(ParseCompletion, TokenIdArraysLongerThanTheContextAreRefusedUnread) {
  const std::vector<int> fits(kModel.max_seq_len - 1, 7), full(kModel.max_seq_len, 7);
  EXPECT_EQ(parse_completion(json{{"prompt", fits}}, kModel).prompt_ids.size(), fits.size());
  for (const json& prompt : {json(full), json::array({full})}) {
    const ApiError e = completion_error(json{{"prompt", prompt}});
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "context_length_exceeded") << e.what();
    EXPECT_EQ(e.param(), "prompt");
  }
  const std::vector<int> window(kModel.max_seq_len, 7), beyond(kModel.max_seq_len + 1, 7);
  EXPECT_EQ(parse_detokenize(json{{"tokens", window}}, kModel).tokens.size(), window.size());
  const ApiError e = error_of(parse_detokenize, json{{"tokens", beyond}});
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "tokens");
  // A bad id is still named by its index.
  std::vector<int> one_bad(10, 7);
  one_bad[9] = 320;
  EXPECT_EQ(error_of(parse_detokenize, json{{"tokens", one_bad}}).param(), "tokens[9]");
}

TEST(ParseCompletion, LogprobsIsACount) {
  auto r = parse_completion(json{{"prompt", "x"}, {"logprobs", 3}}, kModel);
  EXPECT_TRUE(r.fields.sampling.logprobs);
  EXPECT_EQ(r.fields.sampling.top_logprobs, 3);
  r = parse_completion(json{{"prompt", "x"}, {"logprobs", 0}}, kModel);
  EXPECT_TRUE(r.fields.sampling.logprobs);
  EXPECT_EQ(r.fields.sampling.top_logprobs, 0);
  r = parse_completion(json{{"prompt", "x"}, {"logprobs", nullptr}}, kModel);
  EXPECT_FALSE(r.fields.sampling.logprobs);
  EXPECT_EQ(completion_error(json{{"prompt", "x"}, {"logprobs", true}}).param(), "logprobs");
}

TEST(ParseTokenize, PromptOrMessages) {
  auto r = parse_tokenize(json{{"prompt", "hi"}}, kModel);
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_TRUE(r.add_special_tokens);
  r = parse_tokenize(json{{"messages", chat()["messages"]}}, kModel);
  ASSERT_TRUE(r.chat.has_value());
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_EQ(error_of(parse_tokenize, json::object()).status(), 400);
  EXPECT_EQ(
      error_of(parse_tokenize, json{{"prompt", "a"}, {"messages", chat()["messages"]}}).status(),
      400);
  EXPECT_EQ(error_of(parse_tokenize, json{{"prompt", 1}}).param(), "prompt");
}

// The generation routes' policy (docs/api.md): a field the route does not read is a 400 naming
// it, never silently ignored. A field only the other form of /tokenize reads is one of those.
TEST(ParseTokenize, UnknownFieldsAre400NamingThem) {
  const json messages = chat()["messages"];
  const json tool = {{"type", "function"}, {"function", {{"name", "f"}}}};
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"prompt", "hi"}, {"frobnicate", 1}}, "frobnicate"},
      {{{"prompt", "hi"}, {"return_token_strs", true}}, "return_token_strs"},
      {{{"prompt", "hi"}, {"add_generation_prompt", false}}, "add_generation_prompt"},
      {{{"prompt", "hi"}, {"tools", {tool}}}, "tools"},
      {{{"messages", messages}, {"continue_final_message", true}}, "continue_final_message"},
      {{{"messages", messages}, {"tool_choice", "auto"}}, "tool_choice"},
  };
  for (const auto& [body, param] : cases) {
    const ApiError e = error_of(parse_tokenize, body);
    EXPECT_EQ(e.status(), 400) << body.dump();
    EXPECT_EQ(e.param(), param) << body.dump() << ": " << e.what();
  }
  EXPECT_NO_THROW(parse_tokenize(json{{"model", "tinyglm-micro"},
                                      {"prompt", "hi"},
                                      {"add_special_tokens", false},
                                      {"frobnicate", nullptr}},
                                 kModel));
  EXPECT_NO_THROW(parse_tokenize(json{{"messages", messages},
                                      {"add_special_tokens", true},
                                      {"add_generation_prompt", false},
                                      {"tools", {tool}},
                                      {"reasoning_effort", "low"},
                                      {"chat_template_kwargs", {{"enable_thinking", false}}}},
                                 kModel));
}

TEST(ParseDetokenize, UnknownFieldsAre400NamingThem) {
  const ApiError e = error_of(parse_detokenize, json{{"tokens", {104}}, {"prompt", "hi"}});
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.param(), "prompt");
  EXPECT_NO_THROW(parse_detokenize(
      json{{"model", "tinyglm-micro"}, {"tokens", {104}}, {"skip_special_tokens", true}}, kModel));
}

TEST(ParseDetokenize, TokensInRange) {
  auto r = parse_detokenize(json{{"tokens", {104, 105}}}, kModel);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{104, 105}));
  EXPECT_EQ(error_of(parse_detokenize, json::object()).param(), "tokens");
  EXPECT_EQ(error_of(parse_detokenize, json{{"tokens", {1, 1000}}}).status(), 400);
  EXPECT_EQ(error_of(parse_detokenize, json{{"tokens", "1,2"}}).status(), 400);
}

}  // namespace
}  // namespace sparkglm::server
