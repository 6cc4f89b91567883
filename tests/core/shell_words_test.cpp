#include "engine/core/shell_words.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

using Words = std::vector<std::string>;

TEST(ShellWords, SplitsOnBlanksAndKeepsQuotedTextTogether) {
  EXPECT_EQ(split_shell_words("serve  /m --a=1\t--b 'two words' \"x y\"", "cmd"),
            (Words{"serve", "/m", "--a=1", "--b", "two words", "x y"}));
}

TEST(ShellWords, BackslashesEscapeAndContinueLines) {
  EXPECT_EQ(split_shell_words("serve \\\n  --a=1 \\\n  --b=a\\ b", "cmd"),
            (Words{"serve", "--a=1", "--b=a b"}));
  EXPECT_EQ(split_shell_words(R"(x "a\"b" 'c\d')", "cmd"), (Words{"x", "a\"b", "c\\d"}));
}

TEST(ShellWords, AdjacentQuotedPartsFormOneWord) {
  EXPECT_EQ(split_shell_words(R"(--name='a b'"c"d)", "cmd"), (Words{"--name=a bcd"}));
}

TEST(ShellWords, KeepsDollarNamesLiterallyWithoutExpanding) {
  EXPECT_EQ(split_shell_words("serve --model $MODEL \"$HOME\"", "cmd"),
            (Words{"serve", "--model", "$MODEL", "$HOME"}));
}

TEST(ShellWords, CommentsRunToTheEndOfTheLine) {
  EXPECT_EQ(split_shell_words("serve --a # comment ; rm -rf /", "cmd"), (Words{"serve", "--a"}));
}

TEST(ShellWords, QuotedOperatorsAreJustText) {
  EXPECT_EQ(split_shell_words("x ';' \"a|b\" 'a && b'", "cmd"), (Words{"x", ";", "a|b", "a && b"}));
}

TEST(ShellWords, RefusesEveryUnquotedOperatorAndSubstitution) {
  for (const char* text : {"serve; rm -rf /", "serve && touch /tmp/x", "serve | tee log",
                           "serve > out", "serve < in", "serve &", "serve $(touch /tmp/x)",
                           "serve `id`", "(serve)", "serve \"$(id)\"", "serve\nrm -rf /"}) {
    try {
      split_shell_words(text, "inference.command");
      FAIL() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("inference.command"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("never run"), std::string::npos) << e.what();
    }
  }
}

TEST(ShellWords, RefusesUnterminatedQuotes) {
  EXPECT_THROW(split_shell_words("serve 'open", "cmd"), Error);
  EXPECT_THROW(split_shell_words("serve \"open", "cmd"), Error);
  EXPECT_THROW(split_shell_words("serve \\", "cmd"), Error);
}

TEST(ShellWords, ATrailingNewlineIsFine) {
  EXPECT_EQ(split_shell_words("serve --a\n\n", "cmd"), (Words{"serve", "--a"}));
  EXPECT_TRUE(split_shell_words("  \n ", "cmd").empty());
}

}  // namespace
}  // namespace sparkglm
