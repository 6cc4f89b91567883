// The A/B's memory plan on one GPU: both arms get the same explicit KV pool, and the flags that
// would make the arms unequal are refused by name.
#include "gates/device_share.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace sparkglm::gates {
namespace {

constexpr int64_t kH200 = int64_t(143771) << 20;  // nvidia-smi's memory.total, MiB

ArmCommand arm(std::vector<std::string> args) {
  return {"/bin/sparkglm-serve", std::move(args)};
}

std::string error_of(std::vector<ArmCommand*> arms, bool cuda, int64_t bytes) {
  try {
    plan_device_share(arms, cuda, bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceShare, TwoArmsOnOneGpuGetTheSameExplicitPool) {
  ArmCommand cand = arm({"--device", "cuda", "--kv-cache-dtype=fp8_g128"});
  ArmCommand base = arm({"--device", "cuda"});
  const DeviceShare s = plan_device_share({&cand, &base}, true, kH200);
  EXPECT_EQ(s.arms_on_device, 2);
  // A quarter of the device each, whole MiB: both together stay within half of it.
  EXPECT_EQ(s.kv_cache_bytes_per_arm, (kH200 / 4) >> 20 << 20);
  EXPECT_LE(2 * s.kv_cache_bytes_per_arm, kH200 / 2);
  const std::string value = std::to_string(s.kv_cache_bytes_per_arm >> 20) + "MiB";
  for (const ArmCommand* a : {&cand, &base}) {
    ASSERT_GE(a->args.size(), 2u);
    EXPECT_EQ(a->args[a->args.size() - 2], "--kv-cache-memory-bytes");
    EXPECT_EQ(a->args.back(), value);
  }
  EXPECT_EQ(s.to_json()["kv_cache_bytes_per_arm"], s.kv_cache_bytes_per_arm);
  EXPECT_NE(s.source.find("2 arms"), std::string::npos) << s.source;
}

TEST(DeviceShare, OneArmOrTheCpuIsLeftAlone) {
  ArmCommand only = arm({"--device", "cuda"});
  EXPECT_EQ(plan_device_share({&only}, true, kH200).kv_cache_bytes_per_arm, 0);
  EXPECT_EQ(only.args.size(), 2u);
  ArmCommand a = arm({"--device", "cpu"}), b = arm({"--device", "cpu"});
  EXPECT_EQ(plan_device_share({&a, &b}, false, 0).kv_cache_bytes_per_arm, 0);
  EXPECT_EQ(a.args.size(), 2u);
}

TEST(DeviceShare, AGivenEqualPoolIsKeptAndAnUnequalOneRefused) {
  ArmCommand a = arm({"--kv-cache-memory-bytes", "8GiB"}),
             b = arm({"--kv-cache-memory-bytes=8GiB"});
  const DeviceShare s = plan_device_share({&a, &b}, true, kH200);
  EXPECT_EQ(s.kv_cache_bytes_per_arm, 0);
  EXPECT_NE(s.source.find("8GiB"), std::string::npos) << s.source;
  EXPECT_EQ(a.args.size(), 2u);  // nothing added

  ArmCommand c = arm({"--kv-cache-memory-bytes", "8GiB"}), d = arm({});
  const std::string why = error_of({&c, &d}, true, kH200);
  EXPECT_NE(why.find("--kv-cache-memory-bytes: the arms differ (8GiB vs unset)"), std::string::npos)
      << why;
}

TEST(DeviceShare, UtilizationOnASharedDeviceIsRefusedByName) {
  ArmCommand a = arm({"--gpu-memory-utilization", "0.45"}),
             b = arm({"--gpu-memory-utilization", "0.45"});
  const std::string why = error_of({&a, &b}, true, kH200);
  EXPECT_NE(why.find("--gpu-memory-utilization"), std::string::npos) << why;
  EXPECT_NE(why.find("--kv-cache-memory-bytes"), std::string::npos) << why;
}

TEST(DeviceShare, UnknownDeviceMemoryIsAnError) {
  ArmCommand a = arm({}), b = arm({});
  EXPECT_NE(error_of({&a, &b}, true, 0).find("unknown"), std::string::npos);
}

}  // namespace
}  // namespace sparkglm::gates
