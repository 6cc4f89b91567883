#include "engine/text/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sparkglm {
namespace {

// Feeds `text` cut at `cuts` (ascending offsets) and concatenates everything released.
ReasoningDelta feed_in_pieces(std::string_view text, const std::vector<size_t>& cuts,
                              bool thinking) {
  ReasoningParser parser(thinking);
  ReasoningDelta all;
  size_t begin = 0;
  auto take = [&](const ReasoningDelta& d) {
    all.reasoning += d.reasoning;
    all.content += d.content;
  };
  for (size_t cut : cuts) {
    take(parser.feed(text.substr(begin, cut - begin)));
    begin = cut;
  }
  take(parser.feed(text.substr(begin)));
  take(parser.flush());
  return all;
}

TEST(ReasoningParser, ThinkingOnSplitsAtTheCloseTag) {
  const auto d = ReasoningParser::parse("Let me think.</think>The answer.", true);
  EXPECT_EQ(d.reasoning, "Let me think.");
  EXPECT_EQ(d.content, "The answer.");
}

TEST(ReasoningParser, DropsTheOpenTagAndSeparatorNewlinesGlmWrites) {
  // GLM-4.5/4.6 open their own <think> after "<|assistant|>".
  auto d = ReasoningParser::parse("\n<think>Sum them.</think>\n4", true);
  EXPECT_EQ(d.reasoning, "Sum them.");
  EXPECT_EQ(d.content, "4");
  d = ReasoningParser::parse("<think>\n\nline 1\nline 2\n</think>\n\n  indented", true);
  EXPECT_EQ(d.reasoning, "line 1\nline 2\n");
  EXPECT_EQ(d.content, "  indented");
  // Only the first <think> is a tag; text that merely starts like one is reasoning.
  d = ReasoningParser::parse("<think><think>x</think>y", true);
  EXPECT_EQ(d.reasoning, "<think>x");
  d = ReasoningParser::parse("<thinking>x</think>y", true);
  EXPECT_EQ(d.reasoning, "<thinking>x");
  EXPECT_EQ(d.content, "y");
}

TEST(ReasoningParser, TagsAfterTheReasoningAreContent) {
  const auto d = ReasoningParser::parse("r</think>a</think>b<think>c", true);
  EXPECT_EQ(d.reasoning, "r");
  EXPECT_EQ(d.content, "a</think>b<think>c");
}

TEST(ReasoningParser, ThinkingRenderedClosedIsAllContent) {
  const auto d = ReasoningParser::parse("\nHello <think>x</think> there", false);
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Hello <think>x</think> there");
}

TEST(ReasoningParser, UnterminatedReasoningStaysReasoning) {
  // max_tokens can end generation inside the reasoning; a held partial tag is then text.
  const auto d = ReasoningParser::parse("still thinking </thi", true);
  EXPECT_EQ(d.reasoning, "still thinking </thi");
  EXPECT_EQ(d.content, "");
  EXPECT_EQ(ReasoningParser::parse("<thi", true).reasoning, "<thi");
}

TEST(ReasoningParser, HoldsBackOnlyAPossibleTag) {
  ReasoningParser parser(true);
  auto d = parser.feed("abc</th");
  EXPECT_EQ(d.reasoning, "abc");
  d = parser.feed("e");  // "</the" is not the close tag after all
  EXPECT_EQ(d.reasoning, "</the");
  d = parser.feed("x <");
  EXPECT_EQ(d.reasoning, "x ");
  d = parser.feed("/think>\n");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "");
  EXPECT_FALSE(parser.in_reasoning());
  d = parser.feed("\nok <");  // no tags are looked for in content, so nothing is held
  EXPECT_EQ(d.content, "ok <");
  EXPECT_TRUE(parser.flush().empty());
}

TEST(ReasoningParser, TagsSplitAtEveryByteBoundaryMatchUnsplit) {
  const std::vector<std::string> texts = {
      "\n<think>plan: a<b, then </thin k>.</think>\nAnswer: 42 </think>",
      "<think></think>",
      "</think>",
      "no close tag </",
      "\n\n<thi",
      "<think>\n\nr\n</think>\n\nc<think>",
      "héllo 🙂</think>wörld",
  };
  for (const auto& text : texts) {
    for (bool thinking : {true, false}) {
      SCOPED_TRACE("text \"" + text + "\", thinking " + (thinking ? "on" : "off"));
      const ReasoningDelta whole = ReasoningParser::parse(text, thinking);
      for (size_t i = 0; i <= text.size(); ++i) {
        for (size_t j = i; j <= text.size(); ++j) {
          const ReasoningDelta split = feed_in_pieces(text, {i, j}, thinking);
          ASSERT_EQ(split.reasoning, whole.reasoning) << "cut at " << i << " and " << j;
          ASSERT_EQ(split.content, whole.content) << "cut at " << i << " and " << j;
        }
      }
      std::vector<size_t> every_byte;
      for (size_t i = 1; i < text.size(); ++i) every_byte.push_back(i);
      const ReasoningDelta bytes = feed_in_pieces(text, every_byte, thinking);
      EXPECT_EQ(bytes.reasoning, whole.reasoning);
      EXPECT_EQ(bytes.content, whole.content);
    }
  }
  // The unsplit results themselves, so agreement is not agreement on a wrong answer.
  const auto d = ReasoningParser::parse(texts[0], true);
  EXPECT_EQ(d.reasoning, "plan: a<b, then </thin k>.");
  EXPECT_EQ(d.content, "Answer: 42 </think>");
}

}  // namespace
}  // namespace sparkglm
