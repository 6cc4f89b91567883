#include "engine/server/output_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/text/byte_tokenizer.h"

namespace sparkglm::server {
namespace {

struct Collected {
  std::string reasoning, content;
};

Collected run(OutputText& out, const std::vector<int32_t>& ids, int terminal_at = -1) {
  Collected c;
  for (size_t i = 0; i < ids.size(); ++i) {
    const ReasoningDelta d = out.add(ids[i], int(i) == terminal_at);
    c.reasoning += d.reasoning;
    c.content += d.content;
    if (out.stop_string()) return c;
  }
  const ReasoningDelta d = out.finish();
  c.reasoning += d.reasoning;
  c.content += d.content;
  return c;
}

std::vector<int32_t> ids_of(const std::string& text) {
  return ByteTokenizer().encode(text);
}

TEST(OutputText, CompletionTextIsTheDecodedBytes) {
  const auto codec = make_byte_codec();
  OutputText out(*codec, {});
  const Collected c = run(out, ids_of("Hello, \xe2\x9c\xa8 world"));
  EXPECT_EQ(c.content, "Hello, \xe2\x9c\xa8 world");
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(out.tokens(), 16);
}

TEST(OutputText, HalfACharacterIsHeldUntilComplete) {
  const auto codec = make_byte_codec();
  OutputText out(*codec, {});
  EXPECT_EQ(out.add(0xe2).content, "");
  EXPECT_EQ(out.add(0x9c).content, "");
  EXPECT_EQ(out.add(0xa8).content, "\xe2\x9c\xa8");
  EXPECT_EQ(out.add(0xe2).content, "");
  EXPECT_EQ(out.finish().content, "\xef\xbf\xbd");  // a truncated tail becomes U+FFFD
}

TEST(OutputText, StopStringEndsTheTextAndIsNotShown) {
  const auto codec = make_byte_codec();
  OutputTextOptions o;
  o.stop = {"END", "zzz"};
  OutputText out(*codec, o);
  const Collected c = run(out, ids_of("abc ENDdef"));
  EXPECT_EQ(c.content, "abc ");
  ASSERT_TRUE(out.stop_string());
  EXPECT_EQ(*out.stop_string(), "END");
  EXPECT_EQ(out.tokens(), 7);  // tokens up to the one completing the stop string
  // Nothing more comes out after the stop.
  EXPECT_TRUE(out.add('x').empty());
}

TEST(OutputText, IncludeStopStringKeepsIt) {
  const auto codec = make_byte_codec();
  OutputTextOptions o;
  o.stop = {"END"};
  o.include_stop_str_in_output = true;
  OutputText out(*codec, o);
  EXPECT_EQ(run(out, ids_of("abc ENDdef")).content, "abc END");
}

TEST(OutputText, PartialStopAtTheEndIsReleased) {
  const auto codec = make_byte_codec();
  OutputTextOptions o;
  o.stop = {"END"};
  OutputText out(*codec, o);
  const Collected c = run(out, ids_of("abc EN"));
  EXPECT_EQ(c.content, "abc EN");
  EXPECT_FALSE(out.stop_string());
}

TEST(OutputText, TerminalAndControlTokensShowNoText) {
  const auto codec = make_byte_codec();
  OutputText out(*codec, {});
  std::vector<int32_t> ids = ids_of("ab");
  ids.push_back(ByteTokenizer::kSop);  // a control token: skipped
  ids.push_back('c');
  ids.push_back(ByteTokenizer::kUser);  // the eos that ended the sequence
  const Collected c = run(out, ids, int(ids.size()) - 1);
  EXPECT_EQ(c.content, "abc");
  EXPECT_EQ(out.tokens(), 5);
}

TEST(OutputText, SkipSpecialTokensOffShowsControlTokens) {
  const auto codec = make_byte_codec();
  OutputTextOptions o;
  o.skip_special_tokens = false;
  OutputText out(*codec, o);
  EXPECT_EQ(run(out, {'a', ByteTokenizer::kSop, 'b'}).content, "a<sop>b");
}

TEST(OutputText, ReasoningSplitWithThinkingOn) {
  const auto codec = make_byte_codec();
  OutputTextOptions o;
  o.split_reasoning = true;
  o.starts_in_reasoning = true;
  OutputText out(*codec, o);
  std::vector<int32_t> ids = ids_of("\nlet me see");
  ids.push_back(ByteTokenizer::kEndThink);
  for (int32_t id : ids_of("\nThe answer")) ids.push_back(id);
  const Collected c = run(out, ids);
  EXPECT_EQ(c.reasoning, "let me see");
  EXPECT_EQ(c.content, "The answer");
  EXPECT_EQ(out.reasoning_tokens(), 12);  // "\nlet me see" and </think>
}

TEST(OutputText, NoReasoningWithThinkingOff) {
  const auto codec = make_byte_codec();
  OutputTextOptions o;
  o.split_reasoning = true;
  o.starts_in_reasoning = false;
  OutputText out(*codec, o);
  const Collected c = run(out, ids_of("plain answer"));
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.content, "plain answer");
  EXPECT_EQ(out.reasoning_tokens(), 0);
}

TEST(OutputText, StopStringInsideReasoningEndsBoth) {
  const auto codec = make_byte_codec();
  OutputTextOptions o;
  o.split_reasoning = true;
  o.starts_in_reasoning = true;
  o.stop = {"STOP"};
  OutputText out(*codec, o);
  const Collected c = run(out, ids_of("thinking STOP more"));
  EXPECT_EQ(c.reasoning, "thinking ");
  EXPECT_EQ(c.content, "");
  EXPECT_TRUE(out.stop_string());
}

}  // namespace
}  // namespace sparkglm::server

namespace sparkglm::server {
namespace {

// min_tokens holds stop strings back: a stop completed by one of the first min_tokens - 1 tokens
// is plain text; one completed by the min_tokens-th token or later ends the text, even when it
// began earlier.
TEST(OutputText, MinTokensHoldsStopStringsBack) {
  const auto codec = make_byte_codec();
  OutputTextOptions o;
  o.stop = {"ab"};
  o.min_tokens = 4;
  {
    OutputText out(*codec, o);
    // "ab" completes at token 2 (too early) and again at token 6.
    const Collected c = run(out, ids_of("abxxabyy"));
    EXPECT_EQ(c.content, "abxx");
    EXPECT_EQ(out.stop_string(), std::optional<std::string>("ab"));
    EXPECT_EQ(out.tokens(), 6);
  }
  {
    OutputText out(*codec, o);
    // "ab" begins at token 3 and completes at token 4, the min_tokens-th: it counts.
    const Collected c = run(out, ids_of("xxabyy"));
    EXPECT_EQ(c.content, "xx");
    EXPECT_EQ(out.tokens(), 4);
  }
  {
    o.min_tokens = 5;
    OutputText out(*codec, o);
    // Only early stops (tokens 2 and 4): all of it is text.
    const Collected c = run(out, ids_of("abab"));
    EXPECT_EQ(c.content, "abab");
    EXPECT_FALSE(out.stop_string());
  }
  {
    o.min_tokens = 0;  // the default: the first "ab" stops
    OutputText out(*codec, o);
    EXPECT_EQ(run(out, ids_of("abxxab")).content, "");
  }
}

}  // namespace
}  // namespace sparkglm::server
