// GLM tool-call markup parsed into calls: the template's own rendering read back, typing by the
// tool's schema, content around calls, malformed markup as content, the bounds, and streaming
// split at every byte boundary giving what the whole text gives.
#include "engine/text/tool_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/text/chat_template.h"

namespace sparkglm {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::vector<json> weather_tools() {
  return {json::parse(R"({"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
        "where": {"type": "object"}, "tags": {"type": "array"}, "zip": {"type": "string"},
        "ratio": {"type": ["number", "null"]}}}}})"),
          json::parse(R"({"type": "function", "function": {"name": "noop"}})")};
}

// Feeds `pieces` one by one and gathers everything.
ToolParseDelta feed_pieces(const std::vector<std::string>& pieces,
                           std::vector<json> tools = weather_tools(),
                           ToolParserLimits limits = {}) {
  ToolCallParser parser(std::move(tools), limits);
  ToolParseDelta all;
  for (const auto& p : pieces) {
    ToolParseDelta d = parser.feed(p);
    all.content += d.content;
    for (auto& c : d.calls) all.calls.push_back(std::move(c));
  }
  ToolParseDelta d = parser.flush();
  all.content += d.content;
  for (auto& c : d.calls) all.calls.push_back(std::move(c));
  return all;
}

TEST(ToolParser, ReadsBackWhatTheChatTemplateRenders) {
  // The assistant turn as GLM-5.3's template writes it, after "</think>".
  ChatMessage m;
  m.role = ChatRole::kAssistant;
  m.content = "Checking.";
  ToolCall call;
  call.name = "get_weather";
  call.arguments = ordered_json::parse(
      R"({"city": "Paris 7e", "days": 3, "metric": true, "where": {"lat": 48.8, "n": [1, 2]},
          "tags": ["a", "b"], "zip": "075", "ratio": null})");
  m.tool_calls = {call, call};
  m.tool_calls[1].name = "noop";
  m.tool_calls[1].arguments = ordered_json::object();
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  const std::string prompt = render_chat_prompt({m}, options);
  const std::string turn = prompt.substr(prompt.find("</think>") + 8);
  ASSERT_EQ(turn.find("Checking.<tool_call>get_weather<arg_key>city</arg_key>"), 0u) << turn;

  const ToolParseDelta d = ToolCallParser::parse(turn, weather_tools());
  EXPECT_EQ(d.content, "Checking.");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.calls[0].name, "get_weather");
  EXPECT_EQ(d.calls[0].arguments, call.arguments) << d.calls[0].arguments.dump();
  EXPECT_EQ(d.calls[0].arguments.dump(), call.arguments.dump()) << "the order written is kept";
  EXPECT_EQ(d.calls[1].name, "noop");
  EXPECT_TRUE(d.calls[1].arguments.empty());
}

TEST(ToolParser, Glm45NewlinesAreSeparators) {
  const std::string text =
      "Sure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value> Rome </arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>\n";
  const ToolParseDelta d = ToolCallParser::parse(text, weather_tools());
  EXPECT_EQ(d.content, "Sure.");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments["city"], " Rome ") << "a string value is kept as written";
  EXPECT_EQ(d.calls[0].arguments["days"], 2);
}

TEST(ToolParser, ValuesAreTypedByTheSchema) {
  const std::string text =
      "<tool_call>get_weather<arg_key>zip</arg_key><arg_value>123</arg_value>"
      "<arg_key>days</arg_key><arg_value>three</arg_value>"
      "<arg_key>ratio</arg_key><arg_value>0.5</arg_value>"
      "<arg_key>extra</arg_key><arg_value>42</arg_value>"
      "<arg_key>blob</arg_key><arg_value>{\"k\": [true]}</arg_value></tool_call>"
      "<tool_call>unknown<arg_key>x</arg_key><arg_value>[1]</arg_value></tool_call>";
  const ToolParseDelta d = ToolCallParser::parse(text, weather_tools());
  ASSERT_EQ(d.calls.size(), 2u);
  const ordered_json& a = d.calls[0].arguments;
  EXPECT_EQ(a["zip"], "123") << "declared string: kept as text";
  EXPECT_EQ(a["days"], "three") << "declared integer that is not JSON: kept as text";
  EXPECT_EQ(a["ratio"], 0.5);
  EXPECT_EQ(a["extra"], "42") << "undeclared scalar: text";
  EXPECT_EQ(a["blob"], ordered_json::parse(R"({"k": [true]})")) << "undeclared object: JSON";
  EXPECT_EQ(d.calls[1].name, "unknown");
  EXPECT_EQ(d.calls[1].arguments["x"], ordered_json::parse("[1]"));
  EXPECT_EQ(d.content, "");
}

TEST(ToolParser, TextWithoutCallsIsUntouched) {
  const std::string text = "  a < b, <tool and </tool_call> are text \n\n";
  const ToolParseDelta d = ToolCallParser::parse(text, weather_tools());
  EXPECT_EQ(d.content, text);
  EXPECT_TRUE(d.calls.empty());
}

TEST(ToolParser, MalformedOrUnfinishedCallsAreContent) {
  for (const std::string text : {
           "x <tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",  // no name
           "x <tool_call>f junk<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
           "x <tool_call>f<arg_key>a</arg_key>1</tool_call>",             // key without value
           "x <tool_call>f<arg_key>a</arg_key><arg_value>1</tool_call>",  // value unclosed
           "x <tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>",  // call unclosed
       }) {
    SCOPED_TRACE(text);
    const ToolParseDelta d = ToolCallParser::parse(text, weather_tools());
    EXPECT_TRUE(d.calls.empty());
    EXPECT_EQ(d.content, text);
  }
}

TEST(ToolParser, WhitespaceBetweenCallsDropsButTextAfterStays) {
  const std::string call = "<tool_call>noop</tool_call>";
  ToolParseDelta d = ToolCallParser::parse("A  " + call + "\n \n" + call + "\n", weather_tools());
  EXPECT_EQ(d.content, "A");
  EXPECT_EQ(d.calls.size(), 2u);
  d = ToolCallParser::parse(call + "\n done. \n", weather_tools());
  EXPECT_EQ(d.content, "done.");
  EXPECT_EQ(d.calls.size(), 1u);
}

TEST(ToolParser, BoundsOnCallsAndCallSize) {
  std::string text;
  for (int i = 0; i < 5; ++i) text += "<tool_call>noop</tool_call>";
  ToolParserLimits limits;
  limits.max_calls = 3;
  ToolParseDelta d = ToolCallParser::parse(text, weather_tools(), limits);
  EXPECT_EQ(d.calls.size(), 3u);
  EXPECT_EQ(d.content, "<tool_call>noop</tool_call><tool_call>noop</tool_call>");

  limits = {};
  limits.max_call_bytes = 64;
  const std::string big = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>" +
                          std::string(100, 'x') + "</arg_value></tool_call>";
  d = ToolCallParser::parse(big, weather_tools(), limits);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, big);
  // Fed byte by byte, the parser gives up once the bound is passed and holds no more than it.
  ToolCallParser parser(weather_tools(), limits);
  std::string content;
  for (char c : big) content += parser.feed(std::string(1, c)).content;
  content += parser.flush().content;
  EXPECT_EQ(content, big);

  // Arguments nested past the embedded-JSON depth stay text rather than being parsed.
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  d = ToolCallParser::parse("<tool_call>get_weather<arg_key>tags</arg_key><arg_value>" + deep +
                                "</arg_value></tool_call>",
                            weather_tools());
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments["tags"], deep);
}

TEST(ToolParser, EverySplitGivesTheWholeTextsResult) {
  const std::vector<std::string> texts = {
      "Let me look.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>4</arg_value>\n</tool_call>\n<tool_call>noop</"
      "tool_call>",
      "a <tool_call>f<arg_key>x</arg_key>1</tool_call> b <tool_call>noop</tool_call> tail ",
      "<tool_cal <tool_call>noop</tool_call",
  };
  for (const auto& text : texts) {
    SCOPED_TRACE(text);
    const ToolParseDelta whole = ToolCallParser::parse(text, weather_tools());
    auto same = [&](const ToolParseDelta& d, const std::string& how) {
      EXPECT_EQ(d.content, whole.content) << how;
      ASSERT_EQ(d.calls.size(), whole.calls.size()) << how;
      for (size_t i = 0; i < d.calls.size(); ++i) {
        EXPECT_EQ(d.calls[i].name, whole.calls[i].name) << how;
        EXPECT_EQ(d.calls[i].arguments.dump(), whole.calls[i].arguments.dump()) << how;
      }
    };
    for (size_t cut = 0; cut <= text.size(); ++cut)
      same(feed_pieces({text.substr(0, cut), text.substr(cut)}), "cut at " + std::to_string(cut));
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    same(feed_pieces(bytes), "byte by byte");
  }
  EXPECT_EQ(ToolCallParser::parse(texts[0], weather_tools()).calls.size(), 2u);
  EXPECT_EQ(ToolCallParser::parse(texts[1], weather_tools()).content,
            "a <tool_call>f<arg_key>x</arg_key>1</tool_call> b tail");
}

TEST(ToolParser, StreamingShowsContentBeforeTheCallCompletes) {
  ToolCallParser parser(weather_tools());
  EXPECT_EQ(parser.feed("Hello wor").content, "Hello wor");
  EXPECT_EQ(parser.feed("ld <tool_").content, "ld") << "the space and the tag prefix are held";
  ToolParseDelta d = parser.feed("call>noop");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.calls.empty());
  d = parser.feed("</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(parser.calls(), 1u);
  EXPECT_EQ(parser.flush().content, "");
}

}  // namespace
}  // namespace sparkglm
