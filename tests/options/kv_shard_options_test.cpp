// --kv-shard on|off (on by default): with --tp-size N > 1 each rank stores the latents of every
// N-th position (docs/parallel.md). The runner request carries it, the ranks' settings fingerprint
// includes it (ranks that disagree refuse to start, naming it), and a block size that N does not
// divide is refused at start naming both options.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/dist/rank_fingerprint.h"
#include "engine/options/serving_config.h"

namespace sparkglm {
namespace {

EffectiveConfig resolve(std::vector<std::string> args) {
  args.insert(args.begin(), {"--preset", "tinyglm-micro"});
  return parse_serve_args(args, "");
}

TEST(KvShardOptions, OnByDefaultAndOffReachesTheRunnerRequest) {
  EXPECT_TRUE(RunnerRequest{}.kv_shard);
  EXPECT_TRUE(fill_serving_config(resolve({"--tp-size", "2"})).runner.kv_shard);
  EXPECT_FALSE(
      fill_serving_config(resolve({"--tp-size", "2", "--kv-shard", "off"})).runner.kv_shard);
  EXPECT_THROW(resolve({"--kv-shard", "maybe"}), Error);
}

TEST(KvShardOptions, TheRanksFingerprintIncludesItAndNamesADifference) {
  const nlohmann::json on = dist::settings_fingerprint(resolve({"--tp-size", "2"}));
  const nlohmann::json off =
      dist::settings_fingerprint(resolve({"--tp-size", "2", "--kv-shard", "off"}));
  EXPECT_EQ(on.at("settings").at("kv-shard"), "on");
  EXPECT_EQ(dist::fingerprint_difference(on, off, 1),
            "rank 1 differs from rank 0 in settings.kv-shard: \"off\" there, \"on\" on rank 0");
}

TEST(KvShardOptions, ABlockSizeTheRanksDoNotDivideIsRefusedNamingBoth) {
  try {
    resolve({"--tp-size", "4", "--block-size", "6"});
    FAIL() << "--block-size 6 with --tp-size 4 and the KV shard was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("--block-size=6 is not divisible by --tp-size=4"), std::string::npos)
        << what;
    EXPECT_NE(what.find("--kv-shard=on (default)"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(resolve({"--tp-size", "4", "--block-size", "6", "--kv-shard", "off"}));
  EXPECT_NO_THROW(resolve({"--block-size", "6"}));  // one rank: nothing to split
}

}  // namespace
}  // namespace sparkglm
