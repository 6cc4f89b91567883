#include "engine/runtime/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

// The message of the kInvalidArgument error validate() throws, or "" when it accepts.
std::string rejection(const SamplingParams& p, int64_t vocab_size = 0) {
  try {
    p.validate(vocab_size);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

TEST(SamplingParams, DefaultsAreValidAndMatchOpenAi) {
  SamplingParams p;
  EXPECT_EQ(rejection(p), "");
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.min_tokens, 0);
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_FALSE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 0);
  EXPECT_FALSE(p.greedy());
}

TEST(SamplingParams, RejectsEachOutOfRangeFieldNamingFieldAndRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    std::function<void(SamplingParams&)> set;
    std::string field, range;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = -0.1f; }, "`temperature`", "[0, 2]"},
      {[](SamplingParams& p) { p.temperature = 2.5f; }, "`temperature`", "[0, 2]"},
      {[&](SamplingParams& p) { p.temperature = nan; }, "`temperature`", "[0, 2]"},
      {[](SamplingParams& p) { p.top_p = 0.0f; }, "`top_p`", "(0, 1]"},
      {[](SamplingParams& p) { p.top_p = 1.01f; }, "`top_p`", "(0, 1]"},
      {[](SamplingParams& p) { p.top_k = -2; }, "`top_k`", "-1 or 0"},
      {[](SamplingParams& p) { p.min_p = -0.01f; }, "`min_p`", "[0, 1]"},
      {[](SamplingParams& p) { p.min_p = 1.5f; }, "`min_p`", "[0, 1]"},
      {[](SamplingParams& p) { p.presence_penalty = 2.01f; }, "`presence_penalty`", "[-2, 2]"},
      {[](SamplingParams& p) { p.presence_penalty = -3.0f; }, "`presence_penalty`", "[-2, 2]"},
      {[](SamplingParams& p) { p.frequency_penalty = -2.5f; }, "`frequency_penalty`", "[-2, 2]"},
      {[&](SamplingParams& p) { p.frequency_penalty = nan; }, "`frequency_penalty`", "[-2, 2]"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "`repetition_penalty`", "> 0"},
      {[](SamplingParams& p) { p.repetition_penalty = -1.0f; }, "`repetition_penalty`", "> 0"},
      {[](SamplingParams& p) { p.max_tokens = 0; }, "`max_tokens`", ">= 1"},
      {[](SamplingParams& p) { p.min_tokens = -1; }, "`min_tokens`", "[0, max_tokens=16]"},
      {[](SamplingParams& p) { p.min_tokens = 17; }, "`min_tokens`", "[0, max_tokens=16]"},
      {[](SamplingParams& p) {
         p.logprobs = true;
         p.top_logprobs = 21;
       },
       "`top_logprobs`", "[0, 20]"},
      {[](SamplingParams& p) {
         p.logprobs = true;
         p.top_logprobs = -1;
       },
       "`top_logprobs`", "[0, 20]"},
      {[](SamplingParams& p) { p.top_logprobs = 5; }, "`top_logprobs`", "unless logprobs"},
      {[](SamplingParams& p) {
         p.stop_token_ids = {3, -4};
       },
       "`stop_token_ids`", ">= 0"},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    const std::string msg = rejection(p);
    EXPECT_NE(msg.find(c.field), std::string::npos) << "expected " << c.field << " in: " << msg;
    EXPECT_NE(msg.find(c.range), std::string::npos) << "expected " << c.range << " in: " << msg;
  }
}

TEST(SamplingParams, ErrorSaysWhatWasGiven) {
  SamplingParams p;
  p.temperature = 3.5f;
  EXPECT_NE(rejection(p).find("got 3.5"), std::string::npos) << rejection(p);
}

TEST(SamplingParams, AcceptsTheEdgesOfEachRange) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_TRUE(p.greedy());
  EXPECT_EQ(rejection(p), "");
  p.temperature = 2.0f;
  p.top_p = 1.0f;
  p.top_k = -1;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.repetition_penalty = 1e-3f;
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.logprobs = true;
  p.top_logprobs = 20;
  p.stop_token_ids = {0, 99};
  p.seed = 0;
  EXPECT_EQ(rejection(p, 100), "");
  p.top_k = 1000000;  // larger than any vocab just keeps everything
  p.top_p = 1e-6f;
  EXPECT_EQ(rejection(p, 100), "");
}

TEST(SamplingParams, StopTokenIdsMustLieInTheVocabWhenItIsKnown) {
  SamplingParams p;
  p.stop_token_ids = {5, 100};
  EXPECT_EQ(rejection(p), "");  // vocab unknown: only the sign is checked
  const std::string msg = rejection(p, 100);
  EXPECT_NE(msg.find("`stop_token_ids`"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, vocab_size=100)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got 100"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sparkglm
