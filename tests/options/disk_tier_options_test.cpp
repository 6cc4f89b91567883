// --prefix-cache-dir and --prefix-cache-gb: they land in the scheduler's limits and the runner
// request, and settings that cannot work together are refused before the model loads, by a
// message naming the options.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/options/serving_config.h"

namespace sparkglm {
namespace {

ServingConfig fill(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--preset=tinyglm-micro"};
  all.insert(all.end(), args.begin(), args.end());
  const OptionRegistry& r = serving_options();
  return fill_serving_config(EffectiveConfig::resolve(r, nullptr, parse_command_line(all, r)));
}

std::string error_of(const std::vector<std::string>& args) {
  try {
    fill(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DiskTierOptions, LandInTheSchedulerAndTheRunnerRequest) {
  const ServingConfig c =
      fill({"--enable-prefix-caching", "--prefix-cache-dir=/var/cache/glm", "--prefix-cache-gb=3"});
  EXPECT_EQ(c.scheduler.prefix_cache_dir, "/var/cache/glm");
  EXPECT_EQ(c.scheduler.prefix_cache_bytes, uint64_t(3) << 30);
  EXPECT_TRUE(c.runner.prefix_disk_tier) << "its staging comes out of the CPU pool's budget";
  const ServingConfig off = fill({"--enable-prefix-caching"});
  EXPECT_EQ(off.scheduler.prefix_cache_bytes, 0u);
  EXPECT_FALSE(off.runner.prefix_disk_tier);
}

TEST(DiskTierOptions, SettingsThatCannotWorkTogetherAreRefused) {
  EXPECT_EQ(error_of({"--enable-prefix-caching", "--prefix-cache-gb=2"}),
            "invalid argument: --prefix-cache-gb 2 needs --prefix-cache-dir (the directory of the "
            "disk tier)");
  EXPECT_EQ(error_of({"--enable-prefix-caching", "--prefix-cache-dir=/d"}),
            "invalid argument: --prefix-cache-dir /d needs --prefix-cache-gb N (N > 0 GiB)");
  EXPECT_EQ(error_of({"--prefix-cache-dir=/d", "--prefix-cache-gb=2"}),
            "invalid argument: --prefix-cache-dir /d: the disk tier needs --enable-prefix-caching");
  // Both backends copy blocks and snapshots to the host: CUDA is accepted like the CPU.
  EXPECT_EQ(error_of({"--device=cuda", "--enable-prefix-caching", "--prefix-cache-dir=/d",
                      "--prefix-cache-gb=2"}),
            "");
}

}  // namespace
}  // namespace sparkglm
