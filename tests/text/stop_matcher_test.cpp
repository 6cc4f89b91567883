#include "engine/text/stop_matcher.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace sparkglm {
namespace {

struct Outcome {
  std::string text;  // everything released, flush included
  std::optional<std::string> stop;
};

Outcome feed_in_pieces(const std::vector<std::string>& stops, std::string_view text,
                       const std::vector<size_t>& cuts) {
  StopMatcher matcher(stops);
  Outcome all;
  size_t begin = 0;
  auto take = [&](std::string_view piece) {
    StopMatch m = matcher.feed(piece);
    all.text += m.text;
    if (m.stop) {
      EXPECT_FALSE(all.stop.has_value()) << "a second stop after " << *all.stop;
      all.stop = m.stop;
    }
  };
  for (size_t cut : cuts) {
    take(text.substr(begin, cut - begin));
    begin = cut;
  }
  take(text.substr(begin));
  all.text += matcher.flush();
  return all;
}

Outcome whole(const std::vector<std::string>& stops, std::string_view text) {
  return feed_in_pieces(stops, text, {});
}

TEST(StopMatcher, ReleasesTheTextBeforeTheStopAndNotTheStop) {
  StopMatcher matcher({"END"});
  StopMatch m = matcher.feed("hello END world");
  EXPECT_EQ(m.text, "hello ");
  ASSERT_TRUE(m.stop.has_value());
  EXPECT_EQ(*m.stop, "END");
  EXPECT_TRUE(matcher.stopped());
  m = matcher.feed("more END");
  EXPECT_EQ(m.text, "");
  EXPECT_FALSE(m.stop.has_value());
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopMatcher, OverlappingStopsPickTheOneThatCompletesFirst) {
  // "bc" completes before "abcd" would; a token-by-token check would have stopped there.
  Outcome o = whole({"abcd", "bc"}, "xabcdy");
  EXPECT_EQ(o.text, "xa");
  EXPECT_EQ(o.stop, "bc");
  o = whole({"abc", "ab"}, "zabc");
  EXPECT_EQ(o.text, "z");
  EXPECT_EQ(o.stop, "ab");
  // Both complete at the same byte: the one that starts first (the longer) wins.
  o = whole({"bc", "abc"}, "abc");
  EXPECT_EQ(o.text, "");
  EXPECT_EQ(o.stop, "abc");
  // A stop that overlaps itself.
  o = whole({"aab"}, "aaab");
  EXPECT_EQ(o.text, "a");
  EXPECT_EQ(o.stop, "aab");
}

TEST(StopMatcher, NoFalseHoldbackAtTheEnd) {
  StopMatcher matcher({"END", "\n\nUser:"});
  StopMatch m = matcher.feed("hello");
  EXPECT_EQ(m.text, "hello");  // nothing here could start a stop
  EXPECT_EQ(matcher.held_bytes(), 0u);
  m = matcher.feed(" wE");
  EXPECT_EQ(m.text, " w");
  EXPECT_EQ(matcher.held_bytes(), 1u);
  m = matcher.feed("x\n\nUs");
  EXPECT_EQ(m.text, "Ex");
  EXPECT_EQ(matcher.held_bytes(), 4u);
  EXPECT_FALSE(m.stop.has_value());
  // Generation ended without the stop completing: the held text was just text.
  EXPECT_EQ(matcher.flush(), "\n\nUs");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcher, WithoutStopsTextPassesThrough) {
  StopMatcher matcher({"", ""});
  EXPECT_EQ(matcher.feed("any <|user|> text").text, "any <|user|> text");
  EXPECT_EQ(matcher.held_bytes(), 0u);
}

TEST(StopMatcher, StopsSplitAtEveryBoundaryMatchUnsplit) {
  struct Case {
    std::vector<std::string> stops;
    std::string text;
    std::string expected_text;  // of the unsplit run, so agreement is not on a wrong answer
    std::optional<std::string> expected_stop;
  };
  const std::vector<Case> cases = {
      {{"END"}, "ab ENx END cd", "ab ENx ", "END"},
      {{"abcd", "bc"}, "xabcdy", "xa", "bc"},
      {{"ab", "abc", "b"}, "aab", "a", "ab"},
      {{"aab"}, "aaaab", "aa", "aab"},
      {{"\n\n", "\n\nUser:"}, "line\nnext\n\nUser: hi", "line\nnext", "\n\n"},
      {{"🙂", "é!"}, "héllo é🙂 wörld", "héllo é", "🙂"},
      {{"xyz", "yy"}, "xyxy xy", "xyxy xy", std::nullopt},
      {{"STOP"}, "no stop here, ST", "no stop here, ST", std::nullopt},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("text \"" + c.text + "\"");
    const Outcome unsplit = whole(c.stops, c.text);
    EXPECT_EQ(unsplit.text, c.expected_text);
    EXPECT_EQ(unsplit.stop, c.expected_stop);
    for (size_t i = 0; i <= c.text.size(); ++i) {
      for (size_t j = i; j <= c.text.size(); ++j) {
        const Outcome split = feed_in_pieces(c.stops, c.text, {i, j});
        ASSERT_EQ(split.text, unsplit.text) << "cut at " << i << " and " << j;
        ASSERT_EQ(split.stop, unsplit.stop) << "cut at " << i << " and " << j;
      }
    }
    std::vector<size_t> every_byte;
    for (size_t i = 1; i < c.text.size(); ++i) every_byte.push_back(i);
    const Outcome bytes = feed_in_pieces(c.stops, c.text, every_byte);
    EXPECT_EQ(bytes.text, unsplit.text);
    EXPECT_EQ(bytes.stop, unsplit.stop);
  }
}

}  // namespace
}  // namespace sparkglm
