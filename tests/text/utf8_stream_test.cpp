#include "engine/text/utf8_stream.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace sparkglm {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

bool is_continuation(char c) {
  return (uint8_t(c) & 0xC0) == 0x80;
}

// Feeds `bytes` cut at `cuts`; returns each released piece (the flush last).
std::vector<std::string> feed_in_pieces(std::string_view bytes, const std::vector<size_t>& cuts) {
  Utf8Stream stream;
  std::vector<std::string> pieces;
  size_t begin = 0;
  for (size_t cut : cuts) {
    pieces.push_back(stream.feed(bytes.substr(begin, cut - begin)));
    begin = cut;
  }
  pieces.push_back(stream.feed(bytes.substr(begin)));
  pieces.push_back(stream.flush());
  return pieces;
}

std::string joined(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

std::string decode_whole(std::string_view bytes) {
  return joined(feed_in_pieces(bytes, {}));
}

TEST(Utf8Stream, AsciiIsReleasedAtOnce) {
  Utf8Stream stream;
  EXPECT_EQ(stream.feed("plain text <think>"), "plain text <think>");
  EXPECT_EQ(stream.held_bytes(), 0u);
  EXPECT_EQ(stream.flush(), "");
}

TEST(Utf8Stream, ACharacterIsReleasedWhenItsLastByteArrives) {
  Utf8Stream stream;
  const std::string smile = "🙂";  // F0 9F 99 82
  for (size_t i = 0; i + 1 < smile.size(); ++i) {
    EXPECT_EQ(stream.feed(smile.substr(i, 1)), "") << "byte " << i;
    EXPECT_EQ(stream.held_bytes(), i + 1);
  }
  EXPECT_EQ(stream.feed(smile.substr(3) + "a\xC3"), smile + "a");
  EXPECT_EQ(stream.feed("\xA9"), "é");
  EXPECT_EQ(stream.held_bytes(), 0u);
}

TEST(Utf8Stream, MultiByteCharactersSplitAtEveryByteMatchUnsplit) {
  const std::string text = "héllo wörld — 你好, 🙂! \xF4\x8F\xBF\xBF \xED\x9F\xBF";
  ASSERT_EQ(decode_whole(text), text);  // valid UTF-8 comes through unchanged
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); ++j) {
      const auto pieces = feed_in_pieces(text, {i, j});
      ASSERT_EQ(joined(pieces), text) << "cut at " << i << " and " << j;
      // Every piece is whole characters: it neither starts nor ends inside one.
      size_t at = 0;
      for (const auto& p : pieces) {
        at += p.size();
        ASSERT_TRUE(at == text.size() || !is_continuation(text[at]))
            << "a piece ends inside a character at byte " << at << " (cuts " << i << ", " << j
            << ")";
      }
    }
  }
}

TEST(Utf8Stream, IllFormedBytesBecomeReplacementCharacters) {
  struct Case {
    std::string bytes;
    std::string expected;  // as Python's bytes.decode("utf-8", errors="replace") gives
  };
  const std::vector<Case> cases = {
      {"\xFF", kFffd},
      {"a\x80"
       "b",
       "a" + kFffd + "b"},
      {"\xC0\xAF", kFffd + kFffd},                          // overlong "/"
      {"\xE0\x80\xAF", kFffd + kFffd + kFffd},              // overlong
      {"\xED\xA0\x80", kFffd + kFffd + kFffd},              // a UTF-16 surrogate
      {"\xF4\x90\x80\x80", kFffd + kFffd + kFffd + kFffd},  // above U+10FFFF
      {"\xE2\x82"
       "A",
       kFffd + "A"},            // cut short mid-stream
      {"\xF0\x9F\x99", kFffd},  // cut short at the end
      {"\xE0\xA0", kFffd},
      {"\xF0\x9F\x99\xF0\x9F\x99\x82", kFffd + "🙂"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(decode_whole(c.bytes), c.expected) << testing::PrintToString(c.bytes);
    for (size_t i = 0; i <= c.bytes.size(); ++i)
      EXPECT_EQ(joined(feed_in_pieces(c.bytes, {i})), c.expected)
          << testing::PrintToString(c.bytes) << " cut at " << i;
  }
}

TEST(Utf8Stream, IllFormedBytesAreReplacedWithoutWaitingForTheEnd) {
  Utf8Stream stream;
  EXPECT_EQ(stream.feed("\xE2\x82"), "");
  EXPECT_EQ(stream.feed("A"), kFffd + "A");
  EXPECT_EQ(stream.held_bytes(), 0u);
  EXPECT_EQ(stream.feed("\xF0\x9F"), "");
  EXPECT_EQ(stream.flush(), kFffd);
  EXPECT_EQ(stream.held_bytes(), 0u);
}

TEST(Utf8Stream, RandomBytesDecodeTheSameInAnySplit) {
  std::mt19937 rng(7);
  // Bytes drawn mostly from lead and continuation ranges, where the interesting cases are.
  const std::string alphabet =
      "a\x7F\x80\x8F\x90\x9F\xA0\xBF\xC0\xC2\xDF\xE0\xE1\xED\xEF\xF0\xF4\xF5\xFF";
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes(size_t(rng() % 24), '\0');
    for (auto& b : bytes) b = alphabet[rng() % alphabet.size()];
    const std::string expected = decode_whole(bytes);
    std::vector<size_t> cuts;
    for (size_t i = 1; i < bytes.size(); ++i)
      if (rng() % 2) cuts.push_back(i);
    ASSERT_EQ(joined(feed_in_pieces(bytes, cuts)), expected) << testing::PrintToString(bytes);
    // Whatever went in, what comes out is valid UTF-8: it decodes to itself.
    ASSERT_EQ(decode_whole(expected), expected) << testing::PrintToString(bytes);
    ASSERT_EQ(valid_utf8(bytes), expected) << "valid_utf8 is feed then flush";
  }
  EXPECT_EQ(valid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(valid_utf8("caf\xC3"), "caf" + kFffd) << "a character cut at its end";
}

}  // namespace
}  // namespace sparkglm
