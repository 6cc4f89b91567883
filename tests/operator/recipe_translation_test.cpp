#include "operator/recipe_translation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/options/profile.h"
#include "tests/support/build_paths.h"

namespace sparkglm::operator_tool {
namespace {

using nlohmann::json;

FetchedRecipe fetched_from(const json& j, const std::string& source = "https://example.test/r") {
  FetchedRecipe f;
  f.source = source;
  f.bytes = j.dump();
  f.sha256 = sha256_hex(f.bytes);
  f.fetched_at = "2026-11-29T20:00:00Z";
  f.json = j;
  return f;
}

FetchedRecipe fixture(const std::string& name) {
  std::ifstream in(sparkglm::testing::test_data_dir() + "/recipes/" + name);
  std::stringstream text;
  text << in.rdbuf();
  FetchedRecipe f = fetched_from(json::parse(text.str()), "http://127.0.0.1/" + name);
  f.bytes = text.str();
  f.sha256 = sha256_hex(f.bytes);
  return f;
}

ProfileDraft translate(const FetchedRecipe& f, TranslationOptions options = {}) {
  return translate_recipe(parse_recipe(f.json, f.source), f, options, "/tmp/profiles");
}

bool has_line(const std::vector<std::string>& lines, const std::string& prefix) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

const char* const kSeed = "glm-5-3-flash-nvfp4-on-2x-dgx-spark-atlas-rc4-2-tp2-dflash2-1m.json";

TEST(RecipeTranslation, TheSeedRecipeBecomesA4x1mProfile) {
  const FetchedRecipe f = fixture(kSeed);
  const ProfileDraft d = translate(f);
  const Profile p = Profile::parse(d.text, "/tmp/profiles/" + d.name + ".json");
  EXPECT_EQ(p.name(), "glm-5-3-flash-nvfp4-on-2x-dgx-spark-atlas-rc4-2-tp2-dflash2-1m");
  const auto& v = p.values();
  EXPECT_EQ(std::get<std::string>(v.at("preset")), "glm-5.3-flash");
  EXPECT_EQ(std::get<int64_t>(v.at("max-seq-len")), 1048576);
  EXPECT_EQ(std::get<int64_t>(v.at("max-num-seqs")), 4);
  EXPECT_EQ(std::get<int64_t>(v.at("max-batch-size")), 4);
  EXPECT_EQ(std::get<int64_t>(v.at("max-prefill-tokens")), 8192);
  EXPECT_EQ(std::get<double>(v.at("gpu-memory-utilization")), 0.88);
  EXPECT_EQ(std::get<std::string>(v.at("kv-cache-dtype")), "fp8_g128");
  EXPECT_EQ(std::get<int64_t>(v.at("block-size")), 16);
  EXPECT_EQ(std::get<bool>(v.at("enable-prefix-caching")), true);
  EXPECT_EQ(std::get<int64_t>(v.at("prefix-cache-snapshots")), 16);  // --ssm-cache-slots=16
  EXPECT_EQ(std::get<int64_t>(v.at("prefix-snapshot-every")), 0);    // --ssm-checkpoint-interval
  EXPECT_EQ(std::get<int64_t>(v.at("world-size")), 2);
  EXPECT_EQ(std::get<int64_t>(v.at("tp-size")), 2);
  EXPECT_EQ(std::get<std::string>(v.at("device")), "cuda");
  // Every flag is accounted for: applied or listed with a reason.
  EXPECT_EQ(d.applied.size() + d.unsupported.size(), 32u);
  EXPECT_TRUE(has_line(d.unsupported, "--ep-size=2: expert parallelism"));
  EXPECT_TRUE(has_line(d.unsupported, "--dflash: speculative decoding"));
  EXPECT_TRUE(has_line(d.unsupported, "--no-auto-swap: "));
  EXPECT_TRUE(has_line(d.unsupported, "--tool-call-parser=poolside_v1: "));
  EXPECT_TRUE(d.refused_env.empty());
  EXPECT_EQ(d.env_notes.size(), 49u);
  EXPECT_TRUE(has_line(d.env_skipped, "ATLAS_KV_NVME_GB=<half>"));

  const json& prov = p.provenance();
  EXPECT_EQ(prov["source"], f.source);
  EXPECT_EQ(prov["sha256"], f.sha256);
  EXPECT_EQ(prov["fetched_at"], "2026-11-29T20:00:00Z");
  EXPECT_EQ(prov["recipe"]["model_repo"], "nvidia/GLM-5.3-Flash-NVFP4");
  EXPECT_EQ(prov["recipe"]["model_revision"], "423acf37583782c51c142d145aef733d72943d93");
  EXPECT_EQ(prov["recipe"]["quantization"], "NVFP4");
  EXPECT_EQ(prov["unsupported_flags"].size(), d.unsupported.size());
  EXPECT_EQ(prov["environment_notes"]["ATLAS_PDL"], "1");
}

TEST(RecipeTranslation, TheVariantListsItsUnknownFlagAndRefusesLdPreload) {
  const ProfileDraft d = translate(fixture("variant-8x128k.json"));
  const Profile p = Profile::parse(d.text, "/tmp/profiles/" + d.name + ".json");
  EXPECT_EQ(std::get<int64_t>(p.values().at("max-num-seqs")), 8);
  EXPECT_EQ(std::get<int64_t>(p.values().at("max-seq-len")), 131072);
  EXPECT_EQ(std::get<double>(p.values().at("gpu-memory-utilization")), 0.91);
  ASSERT_EQ(d.unsupported.size(), 1u);
  EXPECT_EQ(d.unsupported[0], "--some-future-flag=7: no SparkGLM option of this name");
  ASSERT_EQ(d.refused_env.size(), 1u);
  EXPECT_TRUE(has_line(d.refused_env, "LD_PRELOAD=/tmp/evil.so: refused"));
  // Refused keys appear only as refused: never among the notes a later tool might apply.
  EXPECT_FALSE(p.provenance()["environment_notes"].contains("LD_PRELOAD"));
  EXPECT_EQ(p.provenance()["refused_environment"][0]["key"], "LD_PRELOAD");
  EXPECT_EQ(p.provenance()["environment_notes"]["NCCL_PROTO"], "Simple");
  EXPECT_EQ(d.text.find("evil.so\""), d.text.rfind("evil.so\""));  // only in the refusal
}

TEST(RecipeTranslation, EnvironmentKeysNamingEngineOptionsBecomeOptions) {
  const json j = {{"id", "x"},
                  {"model", "zai-org/GLM-5.3-Flash"},
                  {"command", "serve --max-num-seqs 2"},
                  {"env",
                   "SPARKGLM_KV_CACHE_DTYPE=fp8_g128 SPARKGLM_MAX_NUM_SEQS=6 "
                   "PATH=/evil LD_LIBRARY_PATH=/x NCCL_ALGO=Ring SPARKGLM_API_KEY=k1 "
                   "HF_TOKEN=hf_abc"}};
  const ProfileDraft d = translate(fetched_from(j));
  const Profile p = Profile::parse(d.text, "/tmp/profiles/x.json");
  EXPECT_EQ(std::get<std::string>(p.values().at("kv-cache-dtype")), "fp8_g128");
  EXPECT_EQ(std::get<int64_t>(p.values().at("max-num-seqs")), 2);  // the flag wins
  EXPECT_TRUE(has_line(d.inferred, "SPARKGLM_MAX_NUM_SEQS=6 is not applied"));
  EXPECT_TRUE(has_line(d.refused_env, "PATH=/evil: refused"));
  EXPECT_TRUE(has_line(d.refused_env, "LD_LIBRARY_PATH=/x: refused"));
  EXPECT_TRUE(has_line(d.refused_env, "SPARKGLM_API_KEY=<redacted>: refused"));
  EXPECT_EQ(d.env_notes, (std::vector<std::string>{"NCCL_ALGO", "HF_TOKEN"}));
  EXPECT_EQ(d.profile["provenance"]["environment_notes"]["HF_TOKEN"], "<redacted>");
  EXPECT_EQ(d.text.find("k1"), std::string::npos);
  EXPECT_EQ(d.text.find("hf_abc"), std::string::npos);
}

TEST(RecipeTranslation, TheRecipesDiskTierKnobsSetOurs) {
  // The seed's start.sh knobs become --prefix-cache-dir and --prefix-cache-gb; the tiers it derives
  // from them (ATLAS_KV_NVME_*, two directories) stay notes.
  const json j = {{"id", "x"},
                  {"model", "zai-org/GLM-5.3-Flash"},
                  {"command", "serve --enable-prefix-caching --ssm-cache-slots=16"},
                  {"env",
                   "PREFIX_CACHE_DIR=/nvme/prefix PREFIX_CACHE_GB=64 "
                   "ATLAS_KV_NVME_DIR=/prefix-cache/kv"}};
  const ProfileDraft d = translate(fetched_from(j));
  const Profile p = Profile::parse(d.text, "/tmp/profiles/x.json");
  EXPECT_EQ(std::get<std::string>(p.values().at("prefix-cache-dir")), "/nvme/prefix");
  EXPECT_EQ(std::get<int64_t>(p.values().at("prefix-cache-gb")), 64);
  EXPECT_EQ(std::get<bool>(p.values().at("enable-prefix-caching")), true);
  EXPECT_EQ(d.env_notes, (std::vector<std::string>{"ATLAS_KV_NVME_DIR"}));
}

TEST(RecipeTranslation, OtherEnginesTensorParallelFlagsSetTpSize) {
  // vLLM's --tensor-parallel-size and SGLang's --tp: the ranks sparkglm-serve starts itself.
  for (const char* flag : {"--tensor-parallel-size 2", "--tp=2"}) {
    const json j = {{"id", "x"},
                    {"model", "zai-org/GLM-5.3-Flash"},
                    {"command", std::string("vllm serve m ") + flag}};
    const ProfileDraft d = translate(fetched_from(j));
    const Profile p = Profile::parse(d.text, "/tmp/profiles/x.json");
    EXPECT_EQ(std::get<int64_t>(p.values().at("tp-size")), 2) << flag;
    EXPECT_TRUE(has_line(d.applied, std::string(flag).substr(0, 4))) << flag;
  }
}

TEST(RecipeTranslation, StatesTheLimitsTheRecipeLeavesOut) {
  const json j = {{"id", "x"}, {"model", "GLM-5.3-Flash"}, {"command", "vllm serve m"}};
  const ProfileDraft d = translate(fetched_from(j));
  EXPECT_EQ(d.profile["limits"]["max_num_seqs"], 4);
  EXPECT_EQ(d.profile["limits"]["max_prefill_tokens"], 8192);
  EXPECT_TRUE(has_line(d.inferred, "limits.max_seq_len = 0: the recipe does not state it"));
}

TEST(RecipeTranslation, AValueOurOptionRejectsWritesNothing) {
  const json j = {
      {"id", "x"}, {"model", "GLM-5.3-Flash"}, {"command", "serve --kv-cache-dtype=fp4"}};
  try {
    translate(fetched_from(j));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache-dtype=fp4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16, fp8_g128"), std::string::npos) << e.what();
  }
  const json range = {{"id", "x"}, {"model", "GLM-5.3-Flash"}, {"context", 4194304}, {"cmd", "s"}};
  EXPECT_THROW(translate(fetched_from(range)), Error);
}

TEST(RecipeTranslation, AnUnknownModelNeedsALocalCheckpoint) {
  const json j = {{"id", "x"}, {"model", "meta/Llama-9"}, {"command", "serve /m"}};
  EXPECT_THROW(translate(fetched_from(j)), Error);
  TranslationOptions o;
  o.model_dir = "/data/checkpoints/llama";
  const ProfileDraft d = translate(fetched_from(j), o);
  EXPECT_EQ(d.profile["model"], "/data/checkpoints/llama");
}

TEST(RecipeTranslation, CommandLineOnlyOptionsAreNeverWrittenToAProfile) {
  const json j = {{"id", "x"},
                  {"model", "GLM-5.3-Flash"},
                  {"command", json::array({"serve", "--api-key", "s3cret", "--rank=1"})}};
  const ProfileDraft d = translate(fetched_from(j));
  EXPECT_TRUE(
      has_line(d.unsupported, "--api-key <redacted>: --api-key is set on the command line"));
  EXPECT_TRUE(has_line(d.unsupported, "--rank=1: "));
  EXPECT_FALSE(d.profile["server_args"].contains("api-key"));
}

// The profile is a file others read and commit; the recipe's command is kept in its provenance,
// so every place a key could land holds "<redacted>" instead, and the key appears nowhere.
TEST(RecipeTranslation, KeysInTheRecipeAreRedactedFromTheProfileAndTheReport) {
  const json j = {
      {"id", "x"},
      {"model", "GLM-5.3-Flash"},
      {"env", "HF_TOKEN=hf_SECRET1 NCCL_DEBUG=INFO"},
      {"notes", "run it with --api-key=SECRET2 behind a proxy"},
      {"command",
       json::array({"OPENAI_API_KEY=SECRET3", "vllm", "serve", "--api-key=SECRET4", "--hf-token",
                    "SECRET5", "--max-num-batched-tokens", "8192", "--max-num-seqs", "2"})}};
  const ProfileDraft d = translate(fetched_from(j));
  const std::string report = describe(d);
  for (const char* secret : {"SECRET1", "SECRET2", "SECRET3", "SECRET4", "SECRET5"}) {
    EXPECT_EQ(d.text.find(secret), std::string::npos) << secret << " in\n" << d.text;
    EXPECT_EQ(report.find(secret), std::string::npos) << secret << " in\n" << report;
  }
  const json command = json::parse(d.text)["provenance"]["recipe"]["command"];
  EXPECT_EQ(command, json::array({"OPENAI_API_KEY=<redacted>", "vllm", "serve",
                                  "--api-key=<redacted>", "--hf-token", "<redacted>",
                                  "--max-num-batched-tokens", "8192", "--max-num-seqs", "2"}));
  EXPECT_EQ(json::parse(d.text)["provenance"]["recipe"]["notes"],
            "run it with --api-key=<redacted> behind a proxy");
  EXPECT_EQ(json::parse(d.text)["provenance"]["environment_notes"]["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(
      std::get<int64_t>(Profile::parse(d.text, "/tmp/profiles/x.json").values().at("max-num-seqs")),
      2);
}

TEST(RecipeTranslation, ProfileNamesStayInsideTheProfileFolder) {
  EXPECT_EQ(profile_name_from("../../etc/Passwd"), "etc-passwd");
  EXPECT_EQ(profile_name_from("GLM 5.3 Flash: 8x128K!"), "glm-5.3-flash-8x128k");
  EXPECT_EQ(profile_name_from("///"), "");
  const json j = {{"id", "../../evil"}, {"model", "GLM-5.3-Flash"}, {"command", "serve"}};
  EXPECT_EQ(translate(fetched_from(j)).name, "evil");
  TranslationOptions o;
  o.name = "../outside";
  EXPECT_THROW(translate(fetched_from(j), o), Error);
  o.name = "sub/dir";
  EXPECT_THROW(translate(fetched_from(j), o), Error);
}

TEST(RecipeTranslation, DescribeAccountsForEveryCategory) {
  const std::string text = describe(translate(fixture("variant-8x128k.json")));
  for (const char* part :
       {"applied (11)", "not supported, not in the profile (1)", "--some-future-flag=7",
        "environment refused (1)", "LD_PRELOAD", "kept as notes, not applied (3)"})
    EXPECT_NE(text.find(part), std::string::npos) << part << "\n" << text;
}

}  // namespace
}  // namespace sparkglm::operator_tool
