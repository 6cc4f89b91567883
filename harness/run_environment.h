#pragma once
// The machine a run happened on, as found (qualification.json's `environment`): host, OS, CPU,
// memory, GPUs with driver and clocks (through nvidia-smi when present), and the toolchain this
// harness was built with. Nothing here is configured; everything is read.
#include <nlohmann/json.hpp>

namespace sparkglm::harness {

nlohmann::json probe_environment();

// Whether an NVIDIA GPU answers nvidia-smi on this machine.
bool gpu_present();

}  // namespace sparkglm::harness
