#include "engine/options/effective_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "engine/core/error.h"
#include "tests/support/build_paths.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;

const std::string kProfiles =
    (fs::path(sparkglm::testing::test_data_dir()).parent_path().parent_path() / "profiles")
        .string();

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

EffectiveConfig serve(const std::vector<std::string>& args) {
  return parse_serve_args(args, kProfiles);
}

std::string serve_error(const std::vector<std::string>& args) {
  return error_of([&] { serve(args); });
}

// A small table in deliberately unsorted order, to pin the canonical form byte for byte.
OptionRegistry small_registry() {
  auto spec = [](std::string name, OptionType type, OptionValue v) {
    OptionSpec s;
    s.name = std::move(name);
    s.type = type;
    s.default_value = s.builtin = std::move(v);
    s.help = "test";
    s.min_int = 0;
    s.max_int = 100;
    s.max_float = 1.0;
    return s;
  };
  std::vector<OptionSpec> t = {spec("zeta", OptionType::kString, std::string("z")),
                               spec("alpha", OptionType::kInt, int64_t(3)),
                               spec("mid-flag", OptionType::kBool, false),
                               spec("ratio", OptionType::kFloat, 0.5),
                               spec("token", OptionType::kString, std::string()),
                               spec("slot", OptionType::kInt, int64_t(0))};
  t[4].secret = true;
  t[4].section = ProfileSection::kCommandLineOnly;
  t[5].per_rank = true;
  return OptionRegistry(t);
}

TEST(EffectiveConfig, CanonicalJsonIsSortedCompactAndStable) {
  const OptionRegistry r = small_registry();
  const EffectiveConfig c = EffectiveConfig::resolve(r, nullptr, parse_command_line({}, r));
  EXPECT_EQ(c.canonical_json(),
            R"({"alpha":3,"mid-flag":false,"ratio":0.5,"token":"","zeta":"z"})");
  EXPECT_EQ(c.sha256(), "f907bc3540a7d67be9bb7e38e6c32a1313e5e2cb2f10556397431aa964408654");

  // Per-rank options stay out of the fingerprint; secrets are redacted; other values change it.
  const EffectiveConfig rank3 =
      EffectiveConfig::resolve(r, nullptr, parse_command_line({"--slot=3"}, r));
  EXPECT_EQ(rank3.sha256(), c.sha256());
  EXPECT_EQ(rank3.integer("slot"), 3);
  const EffectiveConfig keyed =
      EffectiveConfig::resolve(r, nullptr, parse_command_line({"--token=hunter2"}, r));
  EXPECT_EQ(keyed.to_json()["token"], "<redacted>");
  EXPECT_EQ(keyed.canonical_json().find("hunter2"), std::string::npos);
  EXPECT_EQ(keyed.str("token"), "hunter2");
  const EffectiveConfig moved =
      EffectiveConfig::resolve(r, nullptr, parse_command_line({"--ratio=0.25"}, r));
  EXPECT_NE(moved.sha256(), c.sha256());
}

TEST(EffectiveConfig, ShaDoesNotDependOnFlagOrderOrSpelling) {
  const EffectiveConfig a = serve({"--preset", "tinyglm", "--port=9000", "--max-body-bytes=1MiB"});
  const EffectiveConfig b =
      serve({"--max-body-bytes", "1048576", "--port", "9000", "--preset=tinyglm"});
  EXPECT_EQ(a.canonical_json(), b.canonical_json());
  EXPECT_EQ(a.sha256(), b.sha256());
  EXPECT_EQ(a.sha256().size(), 64u);
  EXPECT_NE(a.sha256(), serve({"--preset", "tinyglm", "--port=9001"}).sha256());
  // The JSON names every option but the per-rank one, in sorted order.
  const nlohmann::json j = a.to_json();
  EXPECT_EQ(j.size(), serving_options().specs().size() - 1);
  EXPECT_FALSE(j.contains("rank"));
  EXPECT_EQ(j["max-body-bytes"], 1048576);
  EXPECT_EQ(j["port"], 9000);
  EXPECT_EQ(j["gpu-memory-utilization"], 0.9);
}

TEST(EffectiveConfig, PrecedenceIsBuiltinThenProfileThenFlags) {
  const EffectiveConfig c = serve({"--profile", "4x1m", "--max-num-seqs=2", "--threads", "8"});
  EXPECT_EQ(c.integer("max-num-seqs"), 2);
  EXPECT_EQ(c.source("max-num-seqs"), ValueSource::kCommandLine);
  EXPECT_EQ(c.integer("max-seq-len"), 1048576);
  EXPECT_EQ(c.source("max-seq-len"), ValueSource::kProfile);
  EXPECT_EQ(c.number("header-timeout"), 10.0);
  EXPECT_EQ(c.source("header-timeout"), ValueSource::kBuiltin);
  EXPECT_EQ(c.integer("threads"), 8);          // a flag with no profile value logs nothing
  EXPECT_EQ(c.str("kv-cache-dtype"), "bf16");  // fp8_g128 waits for a receipt (G0)
  EXPECT_FALSE(c.boolean("enable-prefix-caching"));
  EXPECT_EQ(c.str("preset"), "glm-5.3-flash");
  EXPECT_EQ(c.log_lines(),
            std::vector<std::string>{"--max-num-seqs=2 overrides profile 4x1m value 4"});
  EXPECT_EQ(c.profile_name(), "4x1m");
  EXPECT_EQ(c.profile_sha256().size(), 64u);
  EXPECT_NE(c.summary().find("profile 4x1m (sha256 " + c.profile_sha256() + "), config sha256 " +
                             c.sha256()),
            std::string::npos);
}

TEST(EffectiveConfig, EveryOverridingFlagLogsOneLine) {
  const EffectiveConfig c =
      serve({"--profile=8x128k", "--device", "cpu", "--max-prefill-tokens=4096",
             "--gpu-memory-utilization=0.5", "--max-num-seqs=8", "--kv-cache-dtype=fp8_g128"});
  EXPECT_EQ(c.log_lines(),
            (std::vector<std::string>{
                "--device=cpu overrides profile 8x128k value cuda",
                "--max-prefill-tokens=4096 overrides profile 8x128k value 8192",
                "--gpu-memory-utilization=0.5 overrides profile 8x128k value 0.88"}));
  EXPECT_EQ(c.source("max-num-seqs"), ValueSource::kCommandLine);    // same value: no line
  EXPECT_EQ(c.source("kv-cache-dtype"), ValueSource::kCommandLine);  // not in the profile: no line
  EXPECT_EQ(c.str("kv-cache-dtype"), "fp8_g128");
}

TEST(EffectiveConfig, ModelFlagReplacesTheProfileModel) {
  const EffectiveConfig p = serve({"--profile", "4x1m", "--preset", "tinyglm-micro"});
  EXPECT_EQ(p.str("preset"), "tinyglm-micro");
  EXPECT_EQ(p.log_lines(),
            std::vector<std::string>{
                "--preset=tinyglm-micro overrides profile 4x1m value glm-5.3-flash"});
  const EffectiveConfig m = serve({"--profile", "4x1m", "--model", "/ckpt/glm"});
  EXPECT_EQ(m.str("model"), "/ckpt/glm");
  EXPECT_EQ(m.str("preset"), "");
  EXPECT_EQ(m.source("preset"), ValueSource::kBuiltin);
  EXPECT_EQ(m.log_lines(), std::vector<std::string>{
                               "--model=/ckpt/glm overrides profile 4x1m value glm-5.3-flash"});
  EXPECT_EQ(serve_error({"--preset=tinyglm", "--model=/ckpt"}),
            "invalid argument: --preset and --model are alternatives; give one");
}

TEST(EffectiveConfig, SettingsThatDependOnEachOtherAreChecked) {
  EXPECT_NE(serve_error({}).find("give exactly one model source"), std::string::npos);
  EXPECT_EQ(serve_error({"--preset=tinyglm", "--world-size=2", "--tp-size=4"}),
            "invalid argument: --world-size=2 differs from --tp-size=4: every rank is a "
            "tensor-parallel rank (world-size is 1 or tp-size)");
  EXPECT_EQ(serve_error({"--preset=tinyglm", "--tp-size=2", "--rank=2"}),
            "invalid argument: --rank=2 is not below --tp-size=2");
  EXPECT_EQ(serve({"--preset=tinyglm", "--tp-size=2", "--rank=1"}).integer("rank"), 1);
  EXPECT_EQ(serve({"--preset=tinyglm", "--tensor-parallel-size", "2"}).integer("tp-size"), 2);
  EXPECT_EQ(serve_error({"--preset=tinyglm", "--tp-size=2", "--tensor-parallel-size=2"}),
            "invalid argument: --tp-size given twice");
  EXPECT_EQ(serve_error({"--profile=4x1m", "--rank=2"}),
            "invalid argument: --rank=2 is not below --world-size=2 (profile 4x1m)");
  EXPECT_EQ(serve_error({"--preset=tinyglm", "--num-layers=6"}),
            "invalid argument: --num-layers=6: expected a multiple of 4");
  EXPECT_NE(serve_error({"--model=/ckpt", "--num-layers=4"}).find("applies to --preset only"),
            std::string::npos);
  EXPECT_EQ(serve({"--profile=4x1m-tp4", "--rank=3"}).integer("rank"), 3);
  EXPECT_EQ(serve({"--preset=tinyglm-micro", "--num-layers=4"}).integer("num-layers"), 4);
}

TEST(EffectiveConfig, ProfileErrorsReachTheCaller) {
  EXPECT_NE(serve_error({"--profile=9x9"}).find("no profile \"9x9\""), std::string::npos);
  EXPECT_NE(serve_error({"--profile=9x9"}).find("4x1m, 4x1m-tp4, 4x512k, 8x128k"),
            std::string::npos);
  const std::string argv0 = "sparkglm-serve";
  const char* argv[] = {argv0.c_str(), "--profile", "4x512k", "--port", "0"};
  const EffectiveConfig c = parse_serve_args(5, argv, kProfiles);
  EXPECT_EQ(c.integer("port"), 0);
  EXPECT_EQ(c.integer("max-seq-len"), 524288);
  EXPECT_EQ(c.log_lines(),
            std::vector<std::string>{"--port=0 overrides profile 4x512k value 8893"});
}

}  // namespace
}  // namespace sparkglm
