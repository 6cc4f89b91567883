#pragma once
// The 288 routed experts and the shared expert of one MoE layer at production geometry, generated
// on the device with the dummy-weight function, with host copies fetched on demand for the CPU
// reference. Shared by the decode and prefill MoE rows of the G1 table.
#include <map>
#include <memory>
#include <vector>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/mlp.h"

namespace sparkglm::g1 {

inline constexpr int kExperts = 288, kTopK = 8;
inline constexpr int64_t kExpertD = 4096, kExpertW = 2048;
inline constexpr int64_t kGateUp = 2 * kExpertW * kExpertD;  // elements per expert: [gate | up]
inline constexpr int64_t kDown = kExpertD * kExpertW;        // elements per expert

struct ExpertBank {
  std::shared_ptr<cuda::DeviceBuffer> gate_up, down, shared_gate_up, shared_down;
  std::shared_ptr<cuda::DeviceBuffer> ptrs;   // [2 * kExperts] device pointers: gate_up..., down...
  std::map<int, std::vector<uint16_t>> host;  // expert (kExperts: shared) -> [gate_up | down]

  // The CPU view of expert `e` (kExperts: the shared expert), copied from the device once.
  SwiGluWeights weights(int e);
};

// Weights from dummy-weight seeds seed, seed + 0x0101, ... (one per tensor), so that two tables
// built with different seeds never share weights by accident.
ExpertBank make_expert_bank(uint32_t seed, cudaStream_t s);

}  // namespace sparkglm::g1
