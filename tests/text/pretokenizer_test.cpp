#include "engine/text/pretokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

#include "engine/core/error.h"
#include "engine/text/unicode_tables.h"

namespace sparkglm {
namespace {

std::vector<std::string> split(SplitPattern pattern, std::string_view text) {
  std::vector<std::string_view> views;
  split_by_pattern(pattern, text, views);
  return {views.begin(), views.end()};
}

using Pieces = std::vector<std::string>;

// Expected pieces below are what `tokenizers` (Oniguruma) cuts the same strings into.
TEST(Pretokenizer, Cl100kSplitsLikeTokenizers) {
  EXPECT_EQ(split(SplitPattern::kCl100k, "Hello world's 1234567 !!\n\n  x"),
            (Pieces{"Hello", " world", "'s", " ", "123", "456", "7", " !!\n\n", " ", " x"}));
  EXPECT_EQ(split(SplitPattern::kCl100k, "IT'S 'ſ x"), (Pieces{"IT", "'S", " '", "ſ", " x"}));
  // (?i:'s) also takes U+017F LONG S, which folds to s.
  EXPECT_EQ(split(SplitPattern::kCl100k, "'ſx 'LLama"), (Pieces{"'ſ", "x", " '", "LLama"}));
  EXPECT_EQ(split(SplitPattern::kCl100k, "a   b\t\tc  "),
            (Pieces{"a", "  ", " b", "\t", "\tc", "  "}));
  EXPECT_EQ(split(SplitPattern::kCl100k, "(你好) ,世界\r\n\r\n\ty"),
            (Pieces{"(你好", ")", " ,", "世界", "\r\n\r\n", "\ty"}));
  EXPECT_EQ(split(SplitPattern::kCl100k, "x == 42;\n    return"),
            (Pieces{"x", " ==", " ", "42", ";\n", "   ", " return"}));
  // A combining mark is not a letter; U+3000 is white space that may lead a word.
  EXPECT_EQ(split(SplitPattern::kCl100k, "e\u0301t\u00e9 \u3000漢"),
            (Pieces{"e", "\u0301t\u00e9", " ", "\u3000漢"}));
  EXPECT_EQ(split(SplitPattern::kCl100kSingleDigit, "x 123"), (Pieces{"x", " ", "1", "2", "3"}));
}

TEST(Pretokenizer, Gpt2SplitsLikeTokenizers) {
  EXPECT_EQ(split(SplitPattern::kGpt2, "Hello world's 1234567 !!\n\n  x"),
            (Pieces{"Hello", " world", "'s", " 1234567", " !!", "\n\n ", " x"}));
  EXPECT_EQ(split(SplitPattern::kGpt2, "IT'S 'ſ x"), (Pieces{"IT", "'", "S", " '", "ſ", " x"}));
  EXPECT_EQ(split(SplitPattern::kGpt2, "a   b\t\tc  "),
            (Pieces{"a", "  ", " b", "\t", "\t", "c", "  "}));
  EXPECT_EQ(split(SplitPattern::kGpt2, "x == 42;\n    return"),
            (Pieces{"x", " ==", " 42", ";", "\n   ", " return"}));
}

TEST(Pretokenizer, PiecesCoverAnyByteStringInOrder) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::string s(rng() % 64, '\0');
    for (auto& ch : s) ch = static_cast<char>(rng() % 256);
    for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kCl100k}) {
      std::string joined;
      for (const auto& piece : split(p, s)) {
        EXPECT_FALSE(piece.empty());
        joined += piece;
      }
      EXPECT_EQ(joined, s);
    }
  }
}

TEST(Pretokenizer, KnowsPatternsByTheirExactString) {
  for (SplitPattern p :
       {SplitPattern::kGpt2, SplitPattern::kCl100k, SplitPattern::kCl100kSingleDigit})
    EXPECT_EQ(split_pattern_from_regex(split_pattern_regex(p)), p);
  try {
    split_pattern_from_regex(R"(\p{N}{1,3}|\s+)");
    FAIL() << "an unknown pattern was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(e.message().find(R"(\\p{N}{1,3}|\\s+)"), std::string::npos) << e.message();
  }
}

TEST(Pretokenizer, SequenceAppliesSplitThenByteLevel) {
  nlohmann::json split_stage = nlohmann::json::object();
  split_stage["type"] = "Split";
  split_stage["pattern"]["Regex"] = std::string(split_pattern_regex(SplitPattern::kCl100k));
  split_stage["behavior"] = "Isolated";
  split_stage["invert"] = false;
  const auto byte_stage = nlohmann::json::parse(
      R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": false})");
  nlohmann::json node = nlohmann::json::object();
  node["type"] = "Sequence";
  node["pretokenizers"] = nlohmann::json::array({split_stage, byte_stage});
  const auto glm = Pretokenizer::from_json(node);
  std::vector<std::string> pieces;
  glm.split("x 1234", pieces);
  EXPECT_EQ(pieces, (Pieces{"x", " ", "123", "4"}));
  // add_prefix_space prefixes every piece that reaches ByteLevel, then GPT-2's split runs.
  Pretokenizer::byte_level(/*add_prefix_space=*/true, /*use_regex=*/true).split("a b", pieces);
  EXPECT_EQ(pieces, (Pieces{" a", " b"}));
  Pretokenizer::byte_level(false, false).split("a b", pieces);
  EXPECT_EQ(pieces, (Pieces{"a b"}));
}

TEST(Pretokenizer, RejectsWhatItDoesNotImplement) {
  for (
      const char* bad : {
          R"({"type": "Whitespace"})",
          R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"String": " "},
               "behavior": "Isolated"}, {"type": "ByteLevel"}]})",
          R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+"},
               "behavior": "Isolated"}, {"type": "ByteLevel"}]})",
          R"({"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "ByteLevel"}]})",
          R"({"type": "Sequence", "pretokenizers": []})",
      }) {
    EXPECT_THROW(Pretokenizer::from_json(nlohmann::json::parse(bad)), Error) << bad;
  }
}

TEST(Pretokenizer, UnicodeTablesMatchTheRegexEngine) {
  EXPECT_EQ(unicode_category('A'), UnicodeCategory::kLetter);
  EXPECT_EQ(unicode_category('7'), UnicodeCategory::kNumber);
  EXPECT_EQ(unicode_category(0x0301), UnicodeCategory::kMark);
  EXPECT_EQ(unicode_category(0x4E00), UnicodeCategory::kLetter);
  EXPECT_EQ(unicode_category(0x00BD), UnicodeCategory::kNumber);  // ½
  EXPECT_EQ(unicode_category(0x1C89), UnicodeCategory::kLetter);  // new in Unicode 16.0
  EXPECT_EQ(unicode_category(0x0000), UnicodeCategory::kOther);
  EXPECT_EQ(unicode_category(0x10FFFF), UnicodeCategory::kOther);
  EXPECT_TRUE(is_unicode_white_space(0x3000));
  EXPECT_TRUE(is_unicode_white_space(0x0085));
  EXPECT_FALSE(is_unicode_white_space(0x001C));  // str.isspace() says yes, \s says no
  EXPECT_FALSE(is_unicode_white_space(0x200B));
}

}  // namespace
}  // namespace sparkglm
