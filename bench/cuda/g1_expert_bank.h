#pragma once
// The routed experts and the shared expert of one MoE layer at the G1 model's geometry
// (Harness::model()), generated on the device with the dummy-weight function, with host copies
// fetched on demand for the CPU reference. Shared by the decode and prefill MoE rows of the table.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/mlp.h"

namespace sparkglm::g1 {

struct ExpertShape {
  int experts = 0;     // n_routed_experts
  int top_k = 0;       // num_experts_per_tok
  int64_t hidden = 0;  // D = hidden_size
  int64_t width = 0;   // W = moe_intermediate_size

  static ExpertShape of(const ModelConfig& c) {
    return {c.n_routed_experts, c.num_experts_per_tok, c.hidden_size, c.moe_intermediate_size};
  }
  int64_t gate_up() const { return 2 * width * hidden; }  // elements per expert: [gate | up]
  int64_t down() const { return hidden * width; }         // elements per expert
  // "288 experts top-8 + shared, D 4096, W 2048" for the rows' shapes.
  std::string text() const {
    return std::to_string(experts) + " experts top-" + std::to_string(top_k) + " + shared, D " +
           std::to_string(hidden) + ", W " + std::to_string(width);
  }
};

struct ExpertBank {
  ExpertShape shape;
  std::shared_ptr<cuda::DeviceBuffer> gate_up, down, shared_gate_up, shared_down;
  std::shared_ptr<cuda::DeviceBuffer> ptrs;   // [2 * experts] device pointers: gate_up..., down...
  std::map<int, std::vector<uint16_t>> host;  // expert (shape.experts: shared) -> [gate_up | down]

  // The CPU view of expert `e` (shape.experts: the shared expert), copied from the device once.
  SwiGluWeights weights(int e);
};

// Weights from dummy-weight seeds seed, seed + 0x0101, ... (one per tensor), so that two tables
// built with different seeds never share weights by accident.
ExpertBank make_expert_bank(const ExpertShape& shape, uint32_t seed, cudaStream_t s);

}  // namespace sparkglm::g1
