#pragma once
// How the arms of an A/B share one GPU. Both servers stay resident for the whole run (the arms
// alternate per repetition, QUALIFICATION.md "Statistics and A/B"), so both must fit at once, and
// neither may be favoured by the order they started in. A server's --gpu-memory-utilization
// counts memory other processes already hold, so two arms given the same share do not get the
// same pool (the second one sees the first's memory as taken, and a default 0.9 leaves it none).
// Instead every arm gets the same explicit KV pool, --kv-cache-memory-bytes, sized from the
// device's memory and the number of arms on it; the server sizes everything else (weights,
// workspace, reserve) as before. The plan is recorded in qualification.json's `device_share`, and
// the flag it adds in each arm's `args`. docs/statistics.md says what it does to the noise.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/qualification_run.h"

namespace sparkglm::gates {

// Of the device's memory, this fraction goes to the arms' KV pools together, split evenly; the
// rest is left for each arm's weights, workspace, reserve and CUDA context.
inline constexpr double kKvShareOfDevice = 0.5;

struct DeviceShare {
  int32_t arms_on_device = 1;          // servers resident on the device at once
  int64_t device_bytes = 0;            // the device's memory (0 when not one GPU shared)
  int64_t kv_cache_bytes_per_arm = 0;  // 0: no share imposed (one arm, or the CPU)
  std::string source;                  // why: planned from the device, given by the user, or none

  nlohmann::json to_json() const;
};

// Plans the arms' memory and appends the share to each arm's arguments. `arms`: the servers an
// A/B starts; `on_cuda`: they serve on the GPU; `device_bytes`: the GPU's memory (nvidia-smi).
// Throws Error(kInvalidArgument) naming the flag when the arms carry --gpu-memory-utilization
// (unfair on a shared device) or different --kv-cache-memory-bytes, and when a share is needed
// but the device's memory is unknown.
DeviceShare plan_device_share(const std::vector<ArmCommand*>& arms, bool on_cuda,
                              int64_t device_bytes);

}  // namespace sparkglm::gates
