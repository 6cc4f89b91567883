#pragma once
// G0, the static gate: the committed bundles verify, the results index is fresh, every profile
// option away from the engine's default is backed by a committed receipt that still verifies and
// still qualifies it, and (when a ctest build folder is given) the unit tests passed. Build and
// format are checked by ci/test.sh before this runs; the gate says so rather than claim them.
#include <filesystem>
#include <string>

#include "gates/gate_definition.h"

namespace sparkglm::gates {

struct StaticGateInputs {
  std::filesystem::path receipts = "receipts";
  std::filesystem::path profiles = "profiles";
  std::filesystem::path gates = "gates";
  std::filesystem::path ctest_dir;  // a ctest build folder; empty: unit tests are not judged here
};

GateResult evaluate_static_gate(const GateDefinition& definition, const StaticGateInputs& inputs);

}  // namespace sparkglm::gates
