#include "engine/backend/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "engine/core/error.h"

namespace sparkglm {

std::string gib_text(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(size_t(1) << 30));
  return text;
}

PoolPlan plan_kv_pool(const DeviceMemory& device, const MemoryDemand& d, double utilization,
                      size_t kv_cache_bytes, int block_size, int max_blocks, bool can_cut_depth) {
  PoolPlan p;
  const size_t in_use = device.total > device.free ? device.total - device.free : 0;
  const size_t fixed = in_use + d.weights + d.state + d.workspace + d.reserve;
  p.parts = "weights " + gib_text(d.weights) + ", state slots " + gib_text(d.state) +
            ", workspace " + gib_text(d.workspace) + ", in use before start " + gib_text(in_use) +
            ", reserve " + gib_text(d.reserve);
  if (kv_cache_bytes > 0) {
    if (fixed + kv_cache_bytes > device.total)
      throw Error(ErrorKind::kCapacity, "--kv-cache-memory-bytes " + gib_text(kv_cache_bytes) +
                                            " does not fit on " + device.name + " (" +
                                            gib_text(device.total) + "): " + p.parts);
    p.kv_budget = kv_cache_bytes;
    p.source = "--kv-cache-memory-bytes";
  } else {
    const size_t allowed = size_t(utilization * double(device.total));
    if (fixed >= allowed) {
      char share[32];
      std::snprintf(share, sizeof share, "%g", utilization);
      throw Error(ErrorKind::kCapacity,
                  std::string("--gpu-memory-utilization ") + share + " allows " +
                      gib_text(allowed) + " of " + device.name + "'s " + gib_text(device.total) +
                      ", less than this model needs before any KV block: " + p.parts +
                      (can_cut_depth ? " (a smaller --num-layers fits)" : ""));
    }
    p.kv_budget = allowed - fixed;
    char share[48];
    std::snprintf(share, sizeof share, "%.0f%% of device memory after the rest", utilization * 100);
    p.source = share;
  }
  const size_t blocks = d.per_block > 0 ? p.kv_budget / d.per_block : 0;
  p.num_blocks = int(std::min<size_t>(blocks, size_t(std::max(0, max_blocks))));
  if (p.num_blocks < 1)
    throw Error(ErrorKind::kCapacity, "the KV budget " + gib_text(p.kv_budget) +
                                          " holds no block of " + std::to_string(block_size) +
                                          " tokens (" + std::to_string(d.per_block) + " bytes)");
  return p;
}

}  // namespace sparkglm
