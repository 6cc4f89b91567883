#pragma once
// The servers a qualification run measures. Before the workloads: the candidate (and baseline)
// started with their share of the device, or the server given by --url attached to, and checked
// to serve the same model. After them: each arm's /metrics scraped again into the bundle, its
// counters and emit delay taken as deltas, and the servers the run started stopped. And the
// candidate's identity when no server ran at all.
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/qualification_run.h"
#include "gates/serving_arm.h"
#include "receipts/bundle_writer.h"

namespace sparkglm::gates {

struct QualificationArms {
  std::vector<ServingArm> arms;  // the candidate first, then the baseline when there is one
  nlohmann::json device_share = nullptr;  // qualification.json's `device_share`; null with --url
};

// Whether `cmd` serves on the GPU (--device cuda).
bool serves_on_cuda(const ArmCommand& cmd);

// Attaches to request.external, or plans the device share and starts the candidate and the
// baseline; then checks the arms are comparable. With --url, the limitation that says what was
// not observed is appended to `limitations`.
QualificationArms open_arms(const RunRequest& request, receipts::BundleWriter& bundle,
                            std::ostream& err, std::vector<std::string>& limitations);

// After the run, per arm: its metrics-after.txt in the bundle, its counter deltas and emit delay
// under its label in `counters` and `emit_delays`, and the server stopped when the run started it
// (one that did not stop cleanly is a limitation).
void close_arms(std::vector<ServingArm>& arms, receipts::BundleWriter& bundle,
                nlohmann::json& counters, nlohmann::json& emit_delays,
                std::vector<std::string>& limitations);

// Whether the arm serves dummy weights (its outputs carry no meaning).
bool serves_dummy_weights(const ServingArm& arm);

// The candidate's identity when no server ran (G0, G1): the binary as built, not started.
nlohmann::json build_identity(const ArmCommand& cmd);

}  // namespace sparkglm::gates
