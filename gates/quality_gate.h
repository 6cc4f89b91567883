#pragma once
// The quality gate: G2's "quality_targets" (gates/G2.json) judged on the held-out loss of the
// trained tinyGLM (harness/heldout_loss.h), measured through the engine on a device. The reference
// is the CPU backend's score of the committed weights (the backend that agrees with the float64
// PyTorch model to 1e-6); a candidate passes when
//   nll      <= reference nll x max_nll_ratio (the mean over tasks),
//   nll      <= reference nll x max_task_nll_ratio for every task (6 examples each: noisier), and
//   accuracy >= reference accuracy - max_accuracy_drop (the mean over tasks).
// So a kernel, format, cache or state change that damages the model fails here however fast it
// is; tests/gates/quality_gate_test.cpp breaks the engine on purpose to show that it does.
//
// The targets' probes (quality_targets.probes): greedy replies through sparkglm-serve on the same
// checkpoint, each (case, grader) with a target judged by its pass rate (gates/quality_probes.h).
//
// `sparkglm-qualify quality [--checkpoint DIR] [--heldout FILE] [--device cpu|cuda]
//   [--kv-cache-dtype D] [--precision-mode strict|spark] [--chunk N] [--gates DIR] [--out DIR]
//   [--server-bin PATH] [--workloads DIR]`
// prints the scores beside the reference, the probes' pass rates beside their targets, and exits
// 0 (pass), 1 (fail) or 2 (could not run, or the bundle would not verify). --out writes a quality
// bundle (gates/quality_bundle.h) and verifies it in full; it refuses weights or training sources
// that training.json no longer binds.
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/gate_definition.h"
#include "gates/quality_targets.h"
#include "harness/heldout_loss.h"
#include "workloads/grader.h"

namespace sparkglm::gates {

// G2's quality_targets from gates_dir/G2.json.
QualityTargets load_quality_targets(const std::string& gates_dir);

// One criterion per judged number; a task the reference lacks (or misses) fails. With `probes`
// (the probes workload's grades) and targets that have probes, a criterion per probe target too
// (gates/quality_probes.h).
GateResult judge_quality(const QualityTargets& t, const harness::HeldoutLoss& got,
                         const std::vector<workloads::GradeResult>* probes = nullptr);

int quality_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace sparkglm::gates
