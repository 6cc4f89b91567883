#pragma once
// How a device's memory is shared out at start: what is already in use, the weights, the KDA
// state slots, the step workspace and a reserve come first; the paged KV pool gets what
// --gpu-memory-utilization leaves (or exactly --kv-cache-memory-bytes). Pure arithmetic, so the
// rules are tested on machines without a GPU; runner_factory feeds it the device's numbers.
#include <cstddef>
#include <string>

namespace sparkglm {

struct DeviceMemory {
  std::string name;  // e.g. "NVIDIA H200"
  size_t total = 0;  // bytes
  size_t free = 0;   // bytes free before this process allocated anything
};

// What the CUDA backend keeps free beyond its own buffers: cuBLAS workspaces and captured graphs.
// The runner factory takes it out of the device, and `sparkglm plan` out of each planned device.
inline constexpr size_t kCudaReserveBytes = size_t(768) << 20;

struct MemoryDemand {
  size_t weights = 0, state = 0, workspace = 0, reserve = 0;
  size_t per_block = 0;  // device bytes of one KV block (all layers)
};

struct PoolPlan {
  int num_blocks = 0;
  size_t kv_budget = 0;  // bytes given to the pool
  std::string parts;     // "weights X GiB, state slots ..., ..." for the log
  std::string source;    // why this size: the utilization share or the explicit budget
};

std::string gib_text(size_t bytes);  // "12.34 GiB"

// Throws Error(kCapacity) naming every part when the fixed parts do not fit under the
// utilization share (or the explicit budget does not fit the device), or the budget holds no
// block. `can_cut_depth`: the model is a preset whose --num-layers could be lowered (said so).
PoolPlan plan_kv_pool(const DeviceMemory& device, const MemoryDemand& demand, double utilization,
                      size_t kv_cache_bytes, int block_size, int max_blocks, bool can_cut_depth);

}  // namespace sparkglm
