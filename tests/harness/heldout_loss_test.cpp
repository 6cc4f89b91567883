// read_heldout refuses what it cannot score, naming the example and the field (the scores
// themselves: tests/gates/quality_gate_test.cpp).
#include "harness/heldout_loss.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "engine/core/error.h"

namespace sparkglm::harness {
namespace {

std::string write(const std::string& text) {
  const std::string path = "/tmp/heldout_test_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& text, int64_t max_tokens = 100) {
  try {
    read_heldout(write(text), 320, max_tokens);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::string kHead = R"({"schema": "sparkglm.heldout/1", "generator": "g", "examples": )";

TEST(HeldoutLoss, ReadsAWellFormedSet) {
  const HeldoutSet s = read_heldout(
      write(kHead + R"([{"task": "copy", "reply_from": 2, "tokens": [1, 2, 3, 4]}]})"), 320, 100);
  ASSERT_EQ(s.examples.size(), 1u);
  EXPECT_EQ(s.generator, "g");
  EXPECT_EQ(s.examples[0].task, "copy");
  EXPECT_EQ(s.examples[0].reply_from, 2);
  EXPECT_EQ(s.examples[0].tokens, (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(HeldoutLoss, RefusesWhatItCannotScoreNamingTheExample) {
  EXPECT_NE(error_of(R"({"schema": "other"})").find("sparkglm.heldout/1"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema": 7})").find("sparkglm.heldout/1"), std::string::npos);
  EXPECT_NE(error_of(kHead + "[]}").find("non-empty"), std::string::npos);
  EXPECT_NE(error_of(kHead + R"([{"task": "", "reply_from": 1, "tokens": [1, 2]}]})")
                .find("example 0: \"task\""),
            std::string::npos);
  EXPECT_NE(error_of(kHead + R"([{"task": "t", "reply_from": 2, "tokens": [1, 2]}]})")
                .find("leaves no prompt or no reply"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + R"([{"task": "t", "reply_from": 0, "tokens": [1, 2]}]})")
                .find("leaves no prompt or no reply"),
            std::string::npos);
  EXPECT_NE(
      error_of(kHead + R"([{"task": "t", "reply_from": 1, "tokens": [1, 320]}]})").find("[0, 320)"),
      std::string::npos);
  EXPECT_NE(
      error_of(kHead + R"([{"task": "t", "reply_from": 1, "tokens": [1, "a"]}]})").find("[0, 320)"),
      std::string::npos);
  EXPECT_NE(error_of(kHead + R"([{"task": "t", "reply_from": 1, "tokens": [1, 2, 3]}]})", 2)
                .find("more than the 2"),
            std::string::npos);
  EXPECT_NE(error_of(kHead + "[" + std::string(100, '[') + "]}").find("nested deeper"),
            std::string::npos);
}

}  // namespace
}  // namespace sparkglm::harness
