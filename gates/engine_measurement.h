#pragma once
// `sparkglm-qualify measure`: a G2 measurement bundle from runner-bench files
// ("sparkglm.runner_bench/1", bench/runner_bench.cpp) and optionally a PyTorch peer
// ("sparkglm.torch_peer/1"). The bundle carries the inputs as artifacts, one metric per cell
// (tok/s, fraction of floor; against the peer's eager and compile runs where it has the cell),
// and a G2 gate entry that judges the engine-step targets of gates/G2.json's "engine_targets"
// (gates/engine_targets.h: C1 decode against its weight-streaming floor, C8 over C1, 8K prefill
// against its compute floor, C1 decode and every other cell against torch eager and compile).
// A missed target fails the gate and is written into limitations by how much; the bundle is still
// written (state "measurement").
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/engine_inputs.h"
#include "gates/engine_targets.h"
#include "gates/gate_definition.h"

namespace sparkglm::gates {

struct MeasureRequest {
  std::vector<std::filesystem::path> runner_bench;
  std::filesystem::path torch_peer;  // empty: the peer targets are not judged (said so)
  std::string title, id;
  std::vector<std::string> notes;  // --limitation: why a target is missed, what would close it
  std::filesystem::path out;       // the bundle folder (its name is the id)
  std::filesystem::path gates;     // the gate definitions: G2.json's "engine_targets" judge
};

// The targets over checked inputs; `limitations` gains one line per missed or unjudged target.
GateResult judge_engine_targets(const std::vector<nlohmann::json>& benches,
                                const nlohmann::json& peer, const EngineTargets& targets,
                                std::vector<std::string>& limitations);

// Writes and verifies the bundle; returns its record. Throws Error on bad input.
nlohmann::json write_engine_measurement(const MeasureRequest& request);

}  // namespace sparkglm::gates
