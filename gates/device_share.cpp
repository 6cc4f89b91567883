#include "gates/device_share.h"

#include <optional>

#include "engine/core/error.h"

namespace sparkglm::gates {
namespace {

constexpr const char* kKvFlag = "--kv-cache-memory-bytes";
constexpr const char* kUtilizationFlag = "--gpu-memory-utilization";

// The value of `flag` in `args` ("--flag V" or "--flag=V"; the last one wins, as the server reads
// it), or nothing.
std::optional<std::string> flag_value(const std::vector<std::string>& args,
                                      const std::string& flag) {
  std::optional<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size())
      out = args[i + 1];
    else if (args[i].rfind(flag + "=", 0) == 0)
      out = args[i].substr(flag.size() + 1);
  }
  return out;
}

}  // namespace

nlohmann::json DeviceShare::to_json() const {
  return {{"arms_on_device", arms_on_device},
          {"device_bytes", device_bytes},
          {"kv_cache_bytes_per_arm", kv_cache_bytes_per_arm},
          {"source", source}};
}

DeviceShare plan_device_share(const std::vector<ArmCommand*>& arms, bool on_cuda,
                              int64_t device_bytes) {
  DeviceShare share;
  share.arms_on_device = int32_t(arms.size());
  if (arms.size() < 2) {
    share.source = "one server: it sizes its own memory";
    return share;
  }
  if (!on_cuda) {
    share.source = "host memory: the CPU backend's pools are sized by their own flags";
    return share;
  }
  share.device_bytes = device_bytes;
  std::optional<std::string> given;
  for (size_t a = 0; a < arms.size(); ++a) {
    if (flag_value(arms[a]->args, kUtilizationFlag))
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(kUtilizationFlag) +
                      " with two arms on one device: the share counts memory the other arm "
                      "holds, so the arm started second gets less; give " +
                      kKvFlag + " (the same for both arms) or leave both unset");
    const auto v = flag_value(arms[a]->args, kKvFlag);
    if (a == 0) {
      given = v;
    } else if (v != given) {
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(kKvFlag) + ": the arms differ (" + given.value_or("unset") + " vs " +
                      v.value_or("unset") +
                      "); an A/B on one device gives both arms the same KV pool");
    }
  }
  if (given) {
    share.source = std::string("given: ") + kKvFlag + " " + *given + " on every arm";
    return share;
  }
  if (device_bytes <= 0)
    throw Error(ErrorKind::kInvalidArgument,
                std::string("two arms on one GPU need a memory share, and the device's memory is "
                            "unknown (nvidia-smi gave none): give ") +
                    kKvFlag + " for both arms");
  constexpr int64_t kMiB = int64_t(1) << 20;
  const int64_t per_arm =
      int64_t(double(device_bytes) * kKvShareOfDevice / double(arms.size())) / kMiB * kMiB;
  share.kv_cache_bytes_per_arm = per_arm;
  share.source = "planned: " + std::to_string(int(kKvShareOfDevice * 100)) +
                 " % of the device's memory for KV, split evenly over " +
                 std::to_string(arms.size()) + " arms";
  for (ArmCommand* arm : arms) {
    arm->args.push_back(kKvFlag);
    arm->args.push_back(std::to_string(per_arm / kMiB) + "MiB");
  }
  return share;
}

}  // namespace sparkglm::gates
