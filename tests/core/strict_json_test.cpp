#include "engine/core/strict_json.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

constexpr JsonLimits kSmall{1000, 4};

std::string nested(int levels, char open = '[', char close = ']') {
  return std::string(size_t(levels), open) + std::string(size_t(levels), close);
}

std::string error_of(const std::string& bytes, JsonLimits limits = kSmall) {
  try {
    (void)parse_json(bytes, "doc.json", ErrorKind::kInvalidConfig, limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig) << e.what();
    return e.message();
  }
  return "";
}

TEST(StrictJson, DepthAtTheLimitParsesAndOneMoreIsRefusedByName) {
  EXPECT_EQ(parse_json(nested(4), "doc.json", ErrorKind::kInvalidConfig, kSmall).dump(),
            "[[[[]]]]");
  EXPECT_EQ(error_of(nested(5)), "doc.json: JSON nested deeper than 4 levels");
  EXPECT_EQ(error_of(R"({"a": {"b": {"c": {"d": [1]}}}})"),
            "doc.json: JSON nested deeper than 4 levels");
}

TEST(StrictJson, BracketsInsideStringsDoNotNest) {
  const std::string text = R"({"a": "[[[[[[{{{{{\"[[[[[[", "b": ["]]]]]]\\"]})";
  const auto j = parse_json(text, "doc.json", ErrorKind::kInvalidConfig, kSmall);
  EXPECT_EQ(j["a"], "[[[[[[{{{{{\"[[[[[[");
  EXPECT_EQ(j["b"][0], "]]]]]]\\");
  // An escaped quote does not end the string, so the brackets after it are still text...
  EXPECT_EQ(error_of(R"(["\"", [[[[[1]]]]]])"), "doc.json: JSON nested deeper than 4 levels");
  // ...and closing brackets in a string do not lower the depth of what follows.
  EXPECT_EQ(error_of(R"([[["]]]]]]]", [[1]]]]])"), "doc.json: JSON nested deeper than 4 levels");
}

TEST(StrictJson, SizeIsCheckedBeforeAnything) {
  const std::string big = "\"" + std::string(1200, 'x') + "\"";
  EXPECT_EQ(error_of(big), "doc.json: JSON larger than 1000 bytes (got 1202)");
}

TEST(StrictJson, HostileDepthsFailCleanlyForEveryKindOfInput) {
  // Far beyond any stack: each would crash a recursive walk of the parsed value.
  for (const JsonLimits limits :
       {json_limits::kRequestBody, json_limits::kRequestEmbedded, json_limits::kModelConfig,
        json_limits::kCheckpointIndex, json_limits::kSafetensorsHeader, json_limits::kTokenizer,
        json_limits::kRecipe, json_limits::kProfile, json_limits::kReceipt, json_limits::kWorkload,
        json_limits::kGate, json_limits::kOperatorState, json_limits::kServerReply}) {
    SCOPED_TRACE(limits.max_depth);
    EXPECT_EQ(error_of(nested(200000), limits),
              "doc.json: JSON nested deeper than " + std::to_string(limits.max_depth) + " levels");
    EXPECT_EQ(error_of("{\"a\":" + nested(100000, '{', '}') + "}", limits),
              "doc.json: JSON nested deeper than " + std::to_string(limits.max_depth) + " levels");
    EXPECT_EQ(error_of(nested(limits.max_depth), limits), "");
  }
}

TEST(StrictJson, SyntaxErrorsNameTheDocument) {
  EXPECT_EQ(error_of("{\"a\": ").rfind("doc.json: not valid JSON: ", 0), 0u)
      << error_of("{\"a\": ");
  EXPECT_EQ(error_of("").rfind("doc.json: not valid JSON: ", 0), 0u);
  EXPECT_EQ(error_of("1e999").rfind("doc.json: not valid JSON: ", 0), 0u);
  // Leading closers drive the scan's count below zero, so a deep tail passes the scan; the parser
  // stops at the first closer, before any depth is reached.
  EXPECT_EQ(error_of("]]]]]]]]" + nested(6)).rfind("doc.json: not valid JSON: ", 0), 0u);
}

TEST(StrictJson, OrderedParseKeepsTheWrittenOrderUnderTheSameLimits) {
  const auto j =
      parse_ordered_json(R"({"z": 1, "a": 2})", "args", ErrorKind::kInvalidArgument, kSmall);
  EXPECT_EQ(j.dump(), R"({"z":1,"a":2})");
  EXPECT_THROW(parse_ordered_json(nested(5), "args", ErrorKind::kInvalidArgument, kSmall), Error);
}

TEST(StrictJson, UniqueKeysRejectsARepeatedKeyAndTheDepthLimitStillHolds) {
  auto unique_error = [](const std::string& bytes) -> std::string {
    try {
      (void)parse_json_unique_keys(bytes, "p.json", ErrorKind::kInvalidConfig, kSmall);
    } catch (const Error& e) {
      return e.message();
    }
    return "";
  };
  EXPECT_EQ(unique_error(R"({"a": 1, "b": {"c": 1, "c": 2}})"), "p.json: key \"c\" appears twice");
  EXPECT_EQ(unique_error(R"({"a": {"c": 1}, "b": {"c": 2}})"), "");
  EXPECT_EQ(unique_error(nested(400)), "p.json: JSON nested deeper than 4 levels");
}

}  // namespace
}  // namespace sparkglm
