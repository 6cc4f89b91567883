#include "engine/core/strict_json.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
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

std::string file_error(const std::string& path, JsonLimits limits = kSmall) {
  try {
    (void)parse_json_file(path, ErrorKind::kInvalidConfig, limits);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

// A file that claims gigabytes is refused by its size, before a byte is read or held: the sparse
// file occupies no disk, and reading it whole would ask for 8 GiB.
TEST(StrictJson, FileOverTheLimitIsRefusedBeforeItIsRead) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("strict_json_big_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << "[]";
  std::filesystem::resize_file(path, uintmax_t(8) << 30);
  EXPECT_EQ(file_error(path.string()), path.string() +
                                           ": 8589934592 bytes, larger than the limit of 1000 "
                                           "bytes for this JSON file");
  std::filesystem::resize_file(path, 2);
  EXPECT_EQ(file_error(path.string()), "");
  std::filesystem::remove(path);
}

// A FIFO would block the open until a writer came; /dev/zero never ends; a folder is no file.
TEST(StrictJson, FileThatIsNotARegularFileIsRefusedWithoutOpeningIt) {
  const auto fifo = std::filesystem::temp_directory_path() /
                    ("strict_json_fifo_" + std::to_string(::getpid()) + ".json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(file_error(fifo.string()), "cannot read " + fifo.string() + ": not a regular file");
  std::filesystem::remove(fifo);
  EXPECT_EQ(file_error("/dev/zero"), "cannot read /dev/zero: not a regular file");
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(file_error(dir), "cannot read " + dir + ": not a regular file");
  EXPECT_EQ(file_error("/no/such/file.json").rfind("cannot read /no/such/file.json: ", 0), 0u);
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
