// recipe apply maps vLLM's and SGLang's speculative-decoding flags to --speculative-tokens, and
// lists the drafters SparkGLM does not have (DFlash2, draft models, trees) with the reason.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/core/sha256.h"
#include "engine/options/profile.h"
#include "operator/recipe_translation.h"

namespace sparkglm::operator_tool {
namespace {

using nlohmann::json;

ProfileDraft translate_command(const std::string& command) {
  const json j = {{"id", "x"}, {"model", "zai-org/GLM-5.3-Flash"}, {"command", command}};
  FetchedRecipe f;
  f.source = "https://example.test/r";
  f.bytes = j.dump();
  f.sha256 = sha256_hex(f.bytes);
  f.fetched_at = "2026-11-29T20:00:00Z";
  f.json = j;
  return translate_recipe(parse_recipe(f.json, f.source), f, {}, "/tmp/profiles");
}

int64_t drafts_of(const ProfileDraft& d) {
  const Profile p = Profile::parse(d.text, "/tmp/profiles/x.json");
  const auto& v = p.values();
  const auto it = v.find("speculative-tokens");
  return it == v.end() ? -1 : std::get<int64_t>(it->second);
}

bool has_line(const std::vector<std::string>& lines, const std::string& prefix) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

TEST(RecipeSpeculation, VllmAndSglangDraftCountsBecomeSpeculativeTokens) {
  const std::pair<const char*, int64_t> cases[] = {
      {"vllm serve m --num-speculative-tokens 2", 2},
      {"vllm serve m --speculative-config '{\"method\": \"deepseek_mtp\", "
       "\"num_speculative_tokens\": 3}'",
       3},
      {"vllm serve m --speculative-config='{\"num_speculative_tokens\":1}'", 1},
      {"sglang.launch_server --model-path m --speculative-algorithm NEXTN "
       "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
       3},
  };
  for (const auto& [command, k] : cases) {
    const ProfileDraft d = translate_command(command);
    EXPECT_EQ(drafts_of(d), k) << command;
    EXPECT_TRUE(d.unsupported.empty()) << command << ": " << d.unsupported[0];
  }
  const ProfileDraft sglang = translate_command(
      "sglang.launch_server --model-path m --speculative-algorithm EAGLE --speculative-num-steps "
      "2");
  EXPECT_TRUE(
      has_line(sglang.inferred, "--speculative-algorithm EAGLE: drafting with the model's"));
  EXPECT_TRUE(has_line(sglang.applied, "--speculative-num-steps 2 -> options.speculative-tokens"));
}

TEST(RecipeSpeculation, OtherDraftersTreesAndLongChainsAreListedWithTheReason) {
  const ProfileDraft d = translate_command(
      "vllm serve m --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}' "
      "--speculative-eagle-topk 4 --num-speculative-tokens 8 --dflash --mtp-gate=force "
      "--speculative-draft-model-path /d");
  EXPECT_EQ(drafts_of(d), -1);  // nothing was set
  EXPECT_TRUE(has_line(d.unsupported,
                       "--speculative-config {\"method\": \"ngram\", "
                       "\"num_speculative_tokens\": 3}: method ngram"));
  EXPECT_TRUE(has_line(d.unsupported, "--speculative-eagle-topk 4: SparkGLM drafts a chain"));
  EXPECT_TRUE(has_line(d.unsupported,
                       "--num-speculative-tokens 8: 8 draft tokens: SparkGLM "
                       "chains at most 4"));
  EXPECT_TRUE(has_line(d.unsupported, "--dflash: speculative decoding with a separate drafter"));
  EXPECT_TRUE(has_line(d.unsupported, "--mtp-gate=force: no MTP gate"));
  EXPECT_TRUE(has_line(d.unsupported, "--speculative-draft-model-path /d: speculative decoding"));
  EXPECT_EQ(d.unsupported.size(), 6u);
}

TEST(RecipeSpeculation, AMethodThatIsNotAStringIsListedNotThrown) {
  const ProfileDraft d = translate_command(
      "vllm serve m --speculative-config '{\"method\": 5, "
      "\"num_speculative_tokens\": 1}'");
  EXPECT_EQ(drafts_of(d), -1);
  EXPECT_TRUE(has_line(d.unsupported,
                       "--speculative-config {\"method\": 5, \"num_speculative_tokens\": 1}: "
                       "method: expected a string"));
}

}  // namespace
}  // namespace sparkglm::operator_tool
