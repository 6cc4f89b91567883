#include "engine/text/byte_tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

namespace sparkglm {
namespace {

TEST(ByteTokenizer, RoundTripsAnyByteString) {
  const ByteTokenizer tok;
  std::mt19937 rng(1);
  for (int trial = 0; trial < 500; ++trial) {
    std::string s(size_t(rng() % 200), '\0');
    for (auto& ch : s) ch = char(rng() % 256);
    EXPECT_EQ(tok.decode(tok.encode(s)), s);
    EXPECT_EQ(tok.decode(tok.encode(s, /*parse_special=*/false)), s);
  }
  const std::string utf8 = "héllo wörld — 你好, 🙂 <think>x</think>";
  EXPECT_EQ(tok.decode(tok.encode(utf8)), utf8);
  EXPECT_EQ(tok.encode(std::string("\0\xff", 2)), (std::vector<int32_t>{0, 255}));
}

TEST(ByteTokenizer, SpecialTokensHaveGlmOrderAndParseOnlyWhenAsked) {
  const ByteTokenizer tok;
  EXPECT_EQ(tok.encode("[gMASK]<sop><|user|>hi<|assistant|><think></think>"),
            (std::vector<int32_t>{ByteTokenizer::kGMask, ByteTokenizer::kSop, ByteTokenizer::kUser,
                                  'h', 'i', ByteTokenizer::kAssistant, ByteTokenizer::kThink,
                                  ByteTokenizer::kEndThink}));
  EXPECT_EQ(tok.encode("<sop>", /*parse_special=*/false).size(), 5u);
  EXPECT_EQ(tok.encode("<|observation|><tool_call></tool_call><arg_key><arg_value>").size(), 5u);
  // Eos ids of the real vocabulary come in the same order: endoftext, user, observation.
  EXPECT_EQ(ByteTokenizer::kUser - ByteTokenizer::kEndOfText, 154827 - 154820);
  EXPECT_EQ(ByteTokenizer::kObservation - ByteTokenizer::kEndOfText, 154829 - 154820);
  EXPECT_EQ(tok.decode({'a', ByteTokenizer::kSop, 'b'}, /*skip_special=*/true), "ab");
  EXPECT_EQ(tok.decode({ByteTokenizer::kFirstReserved}), "<|reserved_276|>");
  EXPECT_EQ(tok.encode("<|reserved_300|>"), (std::vector<int32_t>{300}));
  // A prefix of a special token stays bytes.
  EXPECT_EQ(tok.encode("<thin").size(), 5u);
}

TEST(ByteTokenizer, HuggingFaceFilesDescribeTheSameVocabulary) {
  const auto j = nlohmann::json::parse(ByteTokenizer::hf_tokenizer_json());
  EXPECT_EQ(j["model"]["type"], "BPE");
  EXPECT_EQ(j["model"]["vocab"].size(), 256u);
  EXPECT_EQ(j["model"]["vocab"]["a"], int('a'));
  EXPECT_EQ(j["model"]["vocab"]["Ġ"], int(' '));  // ByteLevel's stand-in for a space
  const auto& added = j["added_tokens"];
  ASSERT_EQ(added.size(), size_t(ByteTokenizer::kVocabSize - 256));
  for (const auto& a : added) {
    const int id = a["id"];
    if (auto text = ByteTokenizer::special_text(id)) {
      EXPECT_EQ(a["content"], std::string(*text));
    }
  }
  const auto config = nlohmann::json::parse(ByteTokenizer::hf_tokenizer_config_json());
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");
}

}  // namespace
}  // namespace sparkglm
