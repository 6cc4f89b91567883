// SseParser on byte fragments: an event's data must not depend on where the socket split it.
#include "harness/sse_parser.h"

#include <gtest/gtest.h>

namespace sparkglm::harness {
namespace {

std::vector<std::string> parse_in_pieces(const std::string& stream, size_t piece) {
  SseParser p;
  std::vector<std::string> events;
  for (size_t i = 0; i < stream.size(); i += piece)
    p.feed(std::string_view(stream).substr(i, piece), events);
  EXPECT_FALSE(p.pending()) << "stream: " << stream;
  return events;
}

TEST(SseParser, YieldsEachEventsDataInOrder) {
  const std::string s = "data: {\"a\":1}\n\ndata: [DONE]\n\n";
  EXPECT_EQ(parse_in_pieces(s, s.size()), (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
}

TEST(SseParser, AnySplitGivesTheSameEvents) {
  // LF, CRLF and lone CR line ends, a comment, multi-line data, another field, no-space colon.
  const std::string s =
      ": keep-alive\r\n\r\n"
      "event: chunk\r\ndata: one\r\ndata: two\r\n\r\n"
      "data:three\n\n"
      "id: 7\rdata: four\r\r"
      "data: [DONE]\n\n";
  const std::vector<std::string> expected = {"one\ntwo", "three", "four", "[DONE]"};
  for (size_t piece = 1; piece <= s.size(); ++piece)
    EXPECT_EQ(parse_in_pieces(s, piece), expected) << "fragments of " << piece << " bytes";
}

TEST(SseParser, CrlfSplitBetweenCrAndLfIsOneLineBreak) {
  // Read as two line ends, the LF would be an empty line and end the event after "a".
  SseParser p;
  std::vector<std::string> events;
  p.feed("data: a\r", events);
  p.feed("\ndata: b\r\n", events);
  EXPECT_TRUE(events.empty());
  p.feed("\r\n", events);
  EXPECT_EQ(events, (std::vector<std::string>{"a\nb"}));
}

TEST(SseParser, CommentsAndDatalessEventsYieldNothing) {
  SseParser p;
  std::vector<std::string> events;
  p.feed(": ping\n\nevent: x\n\nid: 3\n\n\n\n", events);
  EXPECT_TRUE(events.empty());
}

TEST(SseParser, EmptyDataIsAnEventAndOnlyOneSpaceIsStripped) {
  SseParser p;
  std::vector<std::string> events;
  p.feed("data:\n\ndata\n\ndata:  two spaces\n\n", events);
  EXPECT_EQ(events, (std::vector<std::string>{"", "", " two spaces"}));
}

TEST(SseParser, PendingWhenTheStreamStopsMidEvent) {
  SseParser p;
  std::vector<std::string> events;
  p.feed("data: [DO", events);
  EXPECT_TRUE(p.pending());
  p.feed("NE]\n", events);
  EXPECT_TRUE(p.pending());  // the line ended but not the event
  EXPECT_TRUE(events.empty());
  p.feed("\n", events);
  EXPECT_FALSE(p.pending());
  EXPECT_EQ(events, (std::vector<std::string>{"[DONE]"}));
}

}  // namespace
}  // namespace sparkglm::harness
