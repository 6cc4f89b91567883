#pragma once
// The engine-step targets that `sparkglm-qualify measure` judges (gates/engine_measurement.h), as
// data: the "engine_targets" section of gates/G2.json. A target changes by editing the JSON, not
// the code. Each target is {"at_least": x} (observed >= x) or {"above": x} (observed > x):
//
//   "engine_targets": {
//     "preset": "tinyglm",                               the benches the targets are stated for
//     "c1_decode_fraction_of_floor": {"at_least": 0.6},  of its weight-streaming floor
//     "c8_over_c1_decode": {"at_least": 5},               C8 aggregate tok/s over C1's
//     "prefill_8k_fraction_of_floor": {"at_least": 0.5}, of its compute floor
//     "c1_decode_over_torch_eager": {"at_least": 3},     C1 tok/s over the PyTorch peer's eager
//     "c1_decode_over_torch_compile": {"above": 1},      ... and torch.compile
//     "cells_over_torch": {"above": 1}                   every other measured cell, either mode
//   }
#include <string>

#include <nlohmann/json.hpp>

namespace sparkglm::gates {

struct EngineTarget {
  double value = 0;
  bool strict = false;  // "above": observed > value; else "at_least": observed >= value

  bool met(double observed) const { return strict ? observed > value : observed >= value; }
  std::string relation() const { return strict ? "> " : ">= "; }
};

struct EngineTargets {
  std::string preset;
  EngineTarget c1_decode_fraction_of_floor;
  EngineTarget c8_over_c1_decode;
  EngineTarget prefill_8k_fraction_of_floor;
  EngineTarget c1_decode_over_torch_eager;
  EngineTarget c1_decode_over_torch_compile;
  EngineTarget cells_over_torch;
};

// Every field is required and no other is allowed; errors are Error(kInvalidConfig) naming
// `where` and the field (e.g. "gates/G2.json.engine_targets.c8_over_c1_decode: expected ...").
EngineTargets parse_engine_targets(const nlohmann::json& j, const std::string& where);

}  // namespace sparkglm::gates
