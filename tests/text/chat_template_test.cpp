#include "engine/text/chat_template.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/text/byte_tokenizer.h"

namespace sparkglm {
namespace {

using nlohmann::json;

std::string render(const std::string& body, ChatFormat format = ChatFormat::kGlm53) {
  ChatRequestText request = parse_chat_messages(json::parse(body));
  request.options.format = format;
  return request.render();
}

std::string render45(const std::string& body) {
  return render(body, ChatFormat::kGlm45);
}

// ---- GLM-5.3-Flash, the default ---------------------------------------------------------------
// Expected strings below are what GLM-5.3-Flash's chat_template.jinja renders (jinja2 with
// trim_blocks and lstrip_blocks, tojson = json.dumps(ensure_ascii=False)) for the same messages,
// with reasoning_effort passed to it as low/high/(unset) and enable_thinking as thinking_enabled().

TEST(ChatTemplateGlm53, SystemAndUserWithThinkingOn) {
  // No newline after any role token; the effort line is always there, Max when unset.
  EXPECT_EQ(render(R"({"messages": [{"role": "system", "content": "You are terse."},
                                    {"role": "user", "content": " Hi\n"}]})"),
            "[gMASK]<sop><|system|>Reasoning Effort: Max<|system|>You are terse.<|user|> Hi\n"
            "<|assistant|><think>");
  const auto request =
      parse_chat_messages(json::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})"));
  EXPECT_EQ(request.options.format, ChatFormat::kGlm53);  // the default
  EXPECT_TRUE(thinking_enabled(request.options));
}

TEST(ChatTemplateGlm53, ThinkingOffClosesTheThinkBlockAndKeepsTheEffortLine) {
  const char* off =
      "[gMASK]<sop><|system|>Reasoning Effort: Max<|system|>You are terse.<|user|>Hi"
      "<|assistant|><think></think>";
  EXPECT_EQ(render(R"({"messages": [{"role": "system", "content": "You are terse."},
                                    {"role": "user", "content": "Hi"}],
                       "chat_template_kwargs": {"enable_thinking": false}})"),
            off);
  EXPECT_EQ(render(R"({"messages": [{"role": "system", "content": "You are terse."},
                                    {"role": "user", "content": "Hi"}],
                       "reasoning_effort": "none"})"),
            off);
  // A level and thinking off together: the level is still rendered; no "/nothink" anywhere.
  EXPECT_EQ(render(R"({"messages": [{"role": "user", "content": "a"},
                                    {"role": "assistant", "content": "b"},
                                    {"role": "user", "content": "c"}],
                       "reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": false}})"),
            "[gMASK]<sop><|system|>Reasoning Effort: High<|user|>a<|assistant|><think></think>b"
            "<|user|>c<|assistant|><think></think>");
}

TEST(ChatTemplateGlm53, ReasoningEffortLevels) {
  struct Case {
    const char* effort;  // nullptr: unset
    const char* prompt;
  };
  const Case cases[] = {
      {nullptr, "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>Hi<|assistant|><think>"},
      {"none", "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>Hi<|assistant|><think></think>"},
      {"minimal", "[gMASK]<sop><|system|>Reasoning Effort: Low<|user|>Hi<|assistant|><think>"},
      {"low", "[gMASK]<sop><|system|>Reasoning Effort: Low<|user|>Hi<|assistant|><think>"},
      {"medium", "[gMASK]<sop><|system|>Reasoning Effort: High<|user|>Hi<|assistant|><think>"},
      {"high", "[gMASK]<sop><|system|>Reasoning Effort: High<|user|>Hi<|assistant|><think>"},
      {"xhigh", "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>Hi<|assistant|><think>"},
      {"max", "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>Hi<|assistant|><think>"},
  };
  for (const auto& c : cases) {
    for (const bool in_kwargs : {false, true}) {
      json body = json::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})");
      if (c.effort && in_kwargs) body["chat_template_kwargs"]["reasoning_effort"] = c.effort;
      if (c.effort && !in_kwargs) body["reasoning_effort"] = c.effort;
      EXPECT_EQ(render(body.dump()), c.prompt)
          << "reasoning_effort " << (c.effort ? c.effort : "unset")
          << (in_kwargs ? " (kwargs)" : "");
    }
  }
  // The effort line comes before the tools turn.
  const std::string with_tools = render(R"({"messages": [{"role": "user", "content": "Hi"}],
      "reasoning_effort": "minimal", "tools": [{"type": "function", "function": {"name": "f"}}]})");
  const std::string head = "[gMASK]<sop><|system|>Reasoning Effort: Low<|system|>\n# Tools\n";
  EXPECT_EQ(with_tools.substr(0, head.size()), head);
}

TEST(ChatTemplateGlm53, NoGenerationPromptEndsAfterTheLastTurn) {
  std::vector<ChatMessage> messages(2);
  messages[0].content = "Hi";
  messages[1].role = ChatRole::kAssistant;
  messages[1].content = "Hello.";
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  EXPECT_EQ(render_chat_prompt(messages, options),
            "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>Hi<|assistant|><think></think>"
            "Hello.");
}

TEST(ChatTemplateGlm53, MultiTurnKeepsReasoningInEveryEarlierTurn) {
  // reasoning_content is kept verbatim in every turn, before the last user turn too; reasoning
  // split out of raw content keeps its newlines; an explicit empty reasoning_content wins.
  EXPECT_EQ(
      render(R"({"messages": [
      {"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
      {"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "  add them\n"},
      {"role": "user", "content": "3+3?"},
      {"role": "assistant", "content": "<think>\nsix</think>\n\n6 "},
      {"role": "assistant", "content": "more", "reasoning_content": ""}]})"),
      "[gMASK]<sop><|system|>Reasoning Effort: Max<|system|>Be brief.<|user|>2+2?<|assistant|>"
      "<think>  add them\n</think>4<|user|>3+3?<|assistant|><think>\nsix</think>6<|assistant|>"
      "<think></think>more<|assistant|><think>");
  // Reasoning is what precedes the first </think> after the last <think> before it; content is
  // what follows the last </think>, stripped as Python strips (U+3000 and U+00A0 are spaces,
  // U+200B is not).
  EXPECT_EQ(render(R"({"messages": [{"role": "user", "content": "q"},
      {"role": "assistant", "content": "a<think>b<think>c</think>d</think> e \u3000"},
      {"role": "assistant", "content": "\u00a0\u200b x\n", "reasoning_content": " r "}]})"),
            "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>q<|assistant|><think>c</think>e"
            "<|assistant|><think> r </think>\u200b x<|assistant|><think>");
}

TEST(ChatTemplateGlm53, ToolsToolCallsAndToolResults) {
  // The function object is listed (keys in nlohmann::json's sorted order; the jinja writes them
  // in the order it is given them); tool calls carry no newlines; one <|observation|> per run.
  const std::string body = R"({
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Forecast «x»",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "reasoning_content": "Need the tool.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather",
         "arguments": "{\"unit\": \"C\", \"city\": \"Paris\", \"opts\": {\"z\": 1, \"a\": [true, null, 1.5, \"q\\\"\\n\"]}}"}},
        {"id": "c2", "type": "function", "function": {"name": "now", "arguments": ""}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
      {"role": "observation", "tool_call_id": "c2", "content": [{"type": "text", "text": "noon"}]},
      {"role": "assistant", "content": "Sunny at noon.", "reasoning_content": "Both known."},
      {"role": "user", "content": "Thanks"}]})";
  EXPECT_EQ(
      render(body),
      "[gMASK]<sop><|system|>Reasoning Effort: Max<|system|>\n# Tools\n\nYou may call one or more "
      "functions to assist with the user query.\n\nYou are provided with function signatures "
      "within <tools></tools> XML tags:\n<tools>\n{\"description\": \"Forecast «x»\", \"name\": "
      "\"get_weather\", \"parameters\": {\"properties\": {\"city\": {\"type\": \"string\"}}, "
      "\"type\": \"object\"}}\n</tools>\n\nFor each function call, output the function name and "
      "arguments within the following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}"
      "</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>"
      "{arg-value-2}</arg_value>...</tool_call><|user|>Weather in Paris?<|assistant|><think>Need "
      "the tool.</think><tool_call>get_weather<arg_key>unit</arg_key><arg_value>C</arg_value>"
      "<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>opts</arg_key><arg_value>"
      "{\"z\": 1, \"a\": [true, null, 1.5, \"q\\\"\\n\"]}</arg_value></tool_call><tool_call>now"
      "</tool_call><|observation|><tool_response>sunny</tool_response><tool_response>noon"
      "</tool_response><|assistant|><think>Both known.</think>Sunny at noon.<|user|>Thanks"
      "<|assistant|><think>");
}

TEST(ChatTemplateGlm53, ToolResultsFollowTheCallOrderWhenTheIdsPairUp) {
  const std::string calls = R"({"role": "assistant", "content": "Checking.", "tool_calls": [
      {"id": "a", "function": {"name": "f", "arguments": {"k": "v"}}},
      {"id": "b", "function": {"name": "g", "arguments": {"n": 2}}}]})";
  const std::string prefix =
      "[gMASK]<sop><|system|>Reasoning Effort: Max<|user|>x<|assistant|><think></think>Checking."
      "<tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call><tool_call>g<arg_key>n"
      "</arg_key><arg_value>2</arg_value></tool_call><|observation|>";
  EXPECT_EQ(render(R"({"messages": [{"role": "user", "content": "x"}, )" + calls + R"(,
      {"role": "tool", "tool_call_id": "b", "content": "rb"},
      {"role": "tool", "tool_call_id": "a", "content": "ra"}]})"),
            prefix +
                "<tool_response>ra</tool_response><tool_response>rb</tool_response>"
                "<|assistant|><think>");
  // An id that matches no call (or is missing, or repeats): message order.
  EXPECT_EQ(render(R"({"messages": [{"role": "user", "content": "x"}, )" + calls + R"(,
      {"role": "tool", "tool_call_id": "b", "content": "rb"},
      {"role": "tool", "tool_call_id": "zz", "content": "rz"}]})"),
            prefix +
                "<tool_response>rb</tool_response><tool_response>rz</tool_response>"
                "<|assistant|><think>");
  EXPECT_EQ(render(R"({"messages": [{"role": "user", "content": "x"}, )" + calls + R"(,
      {"role": "tool", "tool_call_id": "b", "content": "rb"},
      {"role": "tool", "content": "r?"}]})"),
            prefix +
                "<tool_response>rb</tool_response><tool_response>r?</tool_response>"
                "<|assistant|><think>");
}

TEST(ChatTemplateGlm53, ToolListDropsStrictAndDeferredFunctions) {
  EXPECT_EQ(
      render(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "low",
                 "tools": [{"type": "function", "function": {"name": "f", "strict": true, "parameters": {}}},
                           {"type": "function", "function": {"name": "g", "defer_loading": true}},
                           {"type": "function", "function": {"name": "h", "defer_loading": false}},
                           {"type": "function", "function": {"name": "i", "defer_loading": ""}}]})"),
      "[gMASK]<sop><|system|>Reasoning Effort: Low<|system|>\n# Tools\n\nYou may call one or more "
      "functions to assist with the user query.\n\nYou are provided with function signatures "
      "within <tools></tools> XML tags:\n<tools>\n{\"name\": \"f\", \"parameters\": "
      "{}}\n{\"name\": "
      "\"h\"}\n{\"name\": \"i\"}\n</tools>\n\nFor each function call, output the function name and "
      "arguments within the following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}"
      "</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>"
      "{arg-value-2}</arg_value>...</tool_call><|user|>Hi<|assistant|><think>");
}

TEST(ChatTemplateGlm53, DeveloperAndObservationRolesRenderAsSystemAndTool) {
  EXPECT_EQ(render(R"({"messages": [{"role": "developer", "content": "Rules."},
                                    {"role": "user", "content": "Hi"},
                                    {"role": "observation", "content": "r"}]})"),
            "[gMASK]<sop><|system|>Reasoning Effort: Max<|system|>Rules.<|user|>Hi<|observation|>"
            "<tool_response>r</tool_response><|assistant|><think>");
}

TEST(ChatTemplateGlm53, SpecialTokensOfThePromptTokenizeToTheirIds) {
  const ByteTokenizer tok;
  const auto ids = tok.encode(render(R"({"messages": [{"role": "user", "content": "Hi"}],
                                         "reasoning_effort": "none"})"));
  std::vector<int32_t> expected = {ByteTokenizer::kGMask, ByteTokenizer::kSop,
                                   ByteTokenizer::kSystem};
  for (char c : std::string_view("Reasoning Effort: Max")) expected.push_back(c);
  expected.push_back(ByteTokenizer::kUser);
  for (char c : std::string_view("Hi")) expected.push_back(c);
  expected.insert(expected.end(),
                  {ByteTokenizer::kAssistant, ByteTokenizer::kThink, ByteTokenizer::kEndThink});
  EXPECT_EQ(ids, expected);
}

// ---- GLM-4.5/4.6 ------------------------------------------------------------------------------
// Expected strings below are what GLM-4.5/4.6's published chat_template renders (jinja with
// trim_blocks and lstrip_blocks) for the same messages; effort hints are this project's addition.

TEST(ChatTemplateGlm45, SystemAndUserWithThinkingOn) {
  EXPECT_EQ(render45(R"({"messages": [{"role": "system", "content": "You are terse."},
                                    {"role": "user", "content": "Hi"}]})"),
            "[gMASK]<sop><|system|>\nYou are terse.<|user|>\nHi<|assistant|>");
  const auto request =
      parse_chat_messages(json::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})"));
  EXPECT_TRUE(request.options.enable_thinking);
  EXPECT_TRUE(thinking_enabled(request.options));
}

TEST(ChatTemplateGlm45, ThinkingOffRendersClosedThinkAndNothink) {
  EXPECT_EQ(
      render45(R"({"messages": [{"role": "system", "content": "You are terse."},
                                    {"role": "user", "content": "Hi"}],
                       "chat_template_kwargs": {"enable_thinking": false}})"),
      "[gMASK]<sop><|system|>\nYou are terse.<|user|>\nHi/nothink<|assistant|>\n<think></think>");
  // Every user turn gets "/nothink" once; one already ending in it is left alone.
  EXPECT_EQ(render45(R"({"messages": [{"role": "user", "content": "a"},
                                    {"role": "assistant", "content": "b"},
                                    {"role": "user", "content": "c /nothink"}],
                       "chat_template_kwargs": {"enable_thinking": false}})"),
            "[gMASK]<sop><|user|>\na/nothink<|assistant|>\n<think></think>\nb<|user|>\nc "
            "/nothink<|assistant|>\n<think></think>");
}

TEST(ChatTemplateGlm45, NoGenerationPromptEndsAfterTheLastTurn) {
  std::vector<ChatMessage> messages(1);
  messages[0].content = "Hi";
  ChatTemplateOptions options;
  options.format = ChatFormat::kGlm45;
  options.add_generation_prompt = false;
  EXPECT_EQ(render_chat_prompt(messages, options), "[gMASK]<sop><|user|>\nHi");
}

TEST(ChatTemplateGlm45, MultiTurnKeepsReasoningOnlyAfterTheLastUserTurn) {
  // Turn 1's reasoning answered an older question and is dropped; turn 2's reasoning is split out
  // of raw content; an explicit empty reasoning_content wins over content.
  EXPECT_EQ(
      render45(R"({"messages": [
      {"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
      {"role": "user", "content": "2+2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "  add them\n"},
      {"role": "user", "content": "3+3?"},
      {"role": "assistant", "content": "<think>\nsix</think>\n\n6 "},
      {"role": "assistant", "content": "more", "reasoning_content": ""}]})"),
      "[gMASK]<sop><|system|>\nBe brief.<|user|>\n2+2?<|assistant|>\n<think></think>\n4<|user|>\n"
      "3+3?<|assistant|>\n<think>six</think>\n6<|assistant|>\n<think></think>\nmore<|assistant|>");
  EXPECT_EQ(render45(R"({"messages": [{"role": "user", "content": "a"},
                                    {"role": "assistant", "content": "b", "reasoning_content": "r1"},
                                    {"role": "user", "content": "c"}]})"),
            "[gMASK]<sop><|user|>\na<|assistant|>\n<think></think>\nb<|user|>\nc<|assistant|>");
}

TEST(ChatTemplateGlm45, ToolsToolCallsAndToolResults) {
  // Tool schemas render as Python's json.dumps does; nlohmann::json orders their keys, while
  // arguments (parsed from their string) keep the order the model wrote them in.
  const std::string body = R"({
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Forecast «x»",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": null, "reasoning_content": "Need the tool.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather",
         "arguments": "{\"unit\": \"C\", \"city\": \"Paris\", \"opts\": {\"z\": 1, \"a\": [true, null, 1.5, \"q\\\"\\n\"]}}"}},
        {"id": "c2", "type": "function", "function": {"name": "now", "arguments": ""}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
      {"role": "observation", "tool_call_id": "c2", "content": [{"type": "text", "text": "noon"}]}]})";
  EXPECT_EQ(
      render45(body),
      "[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions to assist with the "
      "user query.\n\nYou are provided with function signatures within <tools></tools> XML "
      "tags:\n<tools>\n{\"function\": {\"description\": \"Forecast «x»\", \"name\": "
      "\"get_weather\", \"parameters\": {\"properties\": {\"city\": {\"type\": \"string\"}}, "
      "\"type\": \"object\"}}, \"type\": \"function\"}\n</tools>\n\nFor each function call, "
      "output the function name and arguments within the following XML format:\n"
      "<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}"
      "</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n..."
      "\n</tool_call><|user|>\nWeather in Paris?<|assistant|>\n<think>Need the tool.</think>\n"
      "<tool_call>get_weather\n<arg_key>unit</arg_key>\n<arg_value>C</arg_value>\n<arg_key>city"
      "</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>opts</arg_key>\n<arg_value>{\"z\": 1, "
      "\"a\": [true, null, 1.5, \"q\\\"\\n\"]}</arg_value>\n</tool_call>\n<tool_call>now\n"
      "</tool_call><|observation|>\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n"
      "noon\n</tool_response><|assistant|>");
  const auto request = parse_chat_messages(json::parse(body));
  ASSERT_EQ(request.messages[1].tool_calls.size(), 2u);
  EXPECT_EQ(request.messages[1].tool_calls[0].id, "c1");
  EXPECT_EQ(request.messages[3].role, ChatRole::kTool);
  EXPECT_EQ(request.messages[3].tool_call_id, "c2");

  // Content before a tool call; a new observation turn after an assistant turn.
  EXPECT_EQ(
      render45(R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": "Checking.",
       "tool_calls": [{"function": {"name": "f", "arguments": {"k": "v"}}}]},
      {"role": "tool", "content": "r"}, {"role": "assistant", "content": "done"}]})"),
      "[gMASK]<sop><|user|>\nx<|assistant|>\n<think></think>\nChecking.\n<tool_call>f\n"
      "<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call><|observation|>\n"
      "<tool_response>\nr\n</tool_response><|assistant|>\n<think></think>\ndone<|assistant|>");
}

TEST(ChatTemplateGlm45, ReasoningEffortValues) {
  struct Case {
    const char* effort;
    const char* prompt;
  };
  const Case cases[] = {
      {"none", "[gMASK]<sop><|user|>\nHi/nothink<|assistant|>\n<think></think>"},
      {"minimal", "[gMASK]<sop><|system|>\nReasoning Effort: Low<|user|>\nHi<|assistant|>"},
      {"low", "[gMASK]<sop><|system|>\nReasoning Effort: Low<|user|>\nHi<|assistant|>"},
      {"medium", "[gMASK]<sop><|system|>\nReasoning Effort: High<|user|>\nHi<|assistant|>"},
      {"high", "[gMASK]<sop><|system|>\nReasoning Effort: High<|user|>\nHi<|assistant|>"},
      {"xhigh", "[gMASK]<sop><|system|>\nReasoning Effort: Max<|user|>\nHi<|assistant|>"},
      {"max", "[gMASK]<sop><|system|>\nReasoning Effort: Max<|user|>\nHi<|assistant|>"},
  };
  for (const auto& c : cases) {
    json body = json::parse(R"({"messages": [{"role": "user", "content": "Hi"}]})");
    body["reasoning_effort"] = c.effort;
    EXPECT_EQ(render45(body.dump()), c.prompt) << "reasoning_effort " << c.effort;
    const auto effort = parse_reasoning_effort(c.effort);
    ASSERT_TRUE(effort.has_value()) << c.effort;
    EXPECT_STREQ(to_string(*effort), c.effort);
  }
  // The hint sits before the tools turn, and is not rendered when thinking is off.
  const std::string with_tools = render45(R"({"messages": [{"role": "user", "content": "Hi"}],
      "reasoning_effort": "low", "tools": [{"type": "function", "function": {"name": "f"}}]})");
  const std::string head = "[gMASK]<sop><|system|>\nReasoning Effort: Low<|system|>\n# Tools";
  EXPECT_EQ(with_tools.substr(0, head.size()), head);
  EXPECT_EQ(
      render45(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "high",
                       "chat_template_kwargs": {"enable_thinking": false}})"),
      "[gMASK]<sop><|user|>\nHi/nothink<|assistant|>\n<think></think>");
  EXPECT_FALSE(parse_reasoning_effort("extreme").has_value());
}

TEST(ChatTemplate, KwargsWinOverTopLevelReasoningEffort) {
  auto parse = [](const char* body) { return parse_chat_messages(json::parse(body)).options; };
  auto on_high =
      parse(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none",
                           "chat_template_kwargs": {"reasoning_effort": "high"}})");
  EXPECT_EQ(on_high.reasoning_effort, ReasoningEffort::kHigh);
  EXPECT_TRUE(thinking_enabled(on_high));
  auto off = parse(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "max",
                       "chat_template_kwargs": {"reasoning_effort": "none"}})");
  EXPECT_EQ(off.reasoning_effort, ReasoningEffort::kNone);
  EXPECT_FALSE(thinking_enabled(off));
  // A null or absent kwarg leaves the top-level value; either "off" switch turns thinking off.
  auto kept = parse(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "low",
                        "chat_template_kwargs": {"reasoning_effort": null, "enable_thinking": true}})");
  EXPECT_EQ(kept.reasoning_effort, ReasoningEffort::kLow);
  EXPECT_TRUE(thinking_enabled(kept));
  auto contradicted =
      parse(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "none",
                                "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_FALSE(thinking_enabled(contradicted));
  auto unset = parse(R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": null,
                         "chat_template_kwargs": null, "tools": null})");
  EXPECT_FALSE(unset.reasoning_effort.has_value());
  EXPECT_TRUE(unset.tools.empty());
}

TEST(ChatTemplateGlm45, DeveloperRoleRendersAsSystem) {
  EXPECT_EQ(render45(R"({"messages": [{"role": "developer", "content": "Rules."},
                                    {"role": "user", "content": "Hi"}]})"),
            "[gMASK]<sop><|system|>\nRules.<|user|>\nHi<|assistant|>");
}

TEST(ChatTemplateGlm45, SpecialTokensOfThePromptTokenizeToTheirIds) {
  const ByteTokenizer tok;
  const auto ids = tok.encode(render45(R"({"messages": [{"role": "user", "content": "Hi"}],
                                         "reasoning_effort": "none"})"));
  std::vector<int32_t> expected = {ByteTokenizer::kGMask, ByteTokenizer::kSop,
                                   ByteTokenizer::kUser};
  for (char c : std::string_view("\nHi/nothink")) expected.push_back(c);
  expected.insert(expected.end(), {ByteTokenizer::kAssistant, '\n', ByteTokenizer::kThink,
                                   ByteTokenizer::kEndThink});
  EXPECT_EQ(ids, expected);
}

TEST(ChatTemplate, MalformedRequestFieldsAreNamedErrors) {
  struct Case {
    const char* body;
    const char* path;  // the message must start with it
    ErrorKind kind = ErrorKind::kInvalidArgument;
  };
  const Case cases[] = {
      {R"([1, 2])", "body"},
      {R"({})", "messages"},
      {R"({"messages": null})", "messages"},
      {R"({"messages": "hi"})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [7]})", "messages[0]"},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": 3, "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                        {"role": "robot", "content": "x"}]})",
       "messages[2].role"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content"},
      {R"({"messages": [{"role": "system", "content": {"text": "x"}}]})", "messages[0].content"},
      {R"({"messages": [{"role": "user", "content": ["x"]}]})", "messages[0].content[0]"},
      {R"({"messages": [{"role": "user", "content": [{"text": "x"}]}]})",
       "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": 1}]}]})",
       "messages[0].content[0].type"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                     {"type": "image_url", "image_url": {}}]}]})",
       "messages[0].content[1].type", ErrorKind::kUnsupported},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "messages[0].content[0].text"},
      {R"({"messages": [{"role": "user", "content": [{"type": "text", "text": 2}]}]})",
       "messages[0].content[0].text"},
      {R"({"messages": [{"role": "assistant", "content": "a", "reasoning_content": 1}]})",
       "messages[0].reasoning_content"},
      {R"({"messages": [{"role": "user", "content": "a", "reasoning_content": "r"}]})",
       "messages[0].reasoning_content"},
      {R"({"messages": [{"role": "user", "content": "a", "tool_calls": []}]})",
       "messages[0].tool_calls"},
      {R"({"messages": [{"role": "assistant", "tool_calls": {}}]})", "messages[0].tool_calls"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [1]}]})", "messages[0].tool_calls[0]"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}]})",
       "messages[0].tool_calls[0].id"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]})",
       "messages[0].tool_calls[0].function"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]})",
       "messages[0].tool_calls[0].function"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]})",
       "messages[0].tool_calls[0].function.name"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}]})",
       "messages[0].tool_calls[0].function.name"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": 3}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"messages": [{"role": "tool", "content": "r", "tool_call_id": 4}]})",
       "messages[0].tool_call_id"},
      {R"({"messages": [{"role": "user", "content": "a"}], "reasoning_effort": 2})",
       "reasoning_effort"},
      {R"({"messages": [{"role": "user", "content": "a"}], "reasoning_effort": "extreme"})",
       "reasoning_effort"},
      {R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": []})",
       "chat_template_kwargs"},
      {R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"enable_thinking": "no"}})",
       "chat_template_kwargs.enable_thinking"},
      {R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"reasoning_effort": "HIGH"}})",
       "chat_template_kwargs.reasoning_effort"},
      {R"({"messages": [{"role": "user", "content": "a"}], "tools": {}})", "tools"},
      {R"({"messages": [{"role": "user", "content": "a"}], "tools": [1]})", "tools[0]"},
      {R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "code", "function": {"name": "f"}}]})",
       "tools[0].type"},
      {R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function"}]})",
       "tools[0].function"},
      {R"({"messages": [{"role": "user", "content": "a"}],
           "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {}}]})",
       "tools[1].function.name"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    try {
      parse_chat_messages(json::parse(c.body));
      ADD_FAILURE() << "no error; expected one naming " << c.path;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), c.kind) << e.what();
      const std::string prefix = std::string(c.path) + ":";
      EXPECT_EQ(e.message().substr(0, prefix.size()), prefix) << e.what();
    }
  }
}

// The arguments string is JSON that the template renders recursively: bounded at parse.
TEST(ChatRequest, DeeplyNestedToolArgumentsAreRefusedByName) {
  const json body = {
      {"messages",
       json::array({{{"role", "assistant"},
                     {"tool_calls",
                      json::array({{{"function",
                                     {{"name", "f"},
                                      {"arguments", "{\"a\":" + std::string(30000, '[') +
                                                        std::string(30000, ']') + "}"}}}}})}}})}};
  try {
    parse_chat_messages(body);
    ADD_FAILURE() << "accepted arguments nested 30,001 deep";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.message(),
              "messages[0].tool_calls[0].function.arguments: JSON nested deeper than 64 levels");
  }
}

}  // namespace
}  // namespace sparkglm
