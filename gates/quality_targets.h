#pragma once
// The quality targets as data: the "quality_targets" section of gates/G2.json, which
// `sparkglm-qualify quality` (gates/quality_gate.h) judges the trained tinyGLM's held-out loss by,
// and which the verifier judges a quality bundle's scores by again (gates/quality_bundle.h). A
// target changes by editing the JSON; the superseded G2.json goes to gates/history/ so that bundles
// judged by it stay verifiable.
//
//   "quality_targets": {
//     "checkpoint": "tinyglm/weights/tinyglm-micro-trained", "heldout": ".../heldout.json",
//     "chunk": 256, "max_nll_ratio": 1.02, "max_task_nll_ratio": 1.05, "max_accuracy_drop": 0.01,
//     "reference": {"nll": 0.96, "accuracy": 0.68, "tasks": {"copy": {"nll": 2.82}, ...}},
//     "probes": {"workload": "quality-probes",
//                "min_pass_rate": {"tool_call": {"tool_call": 0.875, "isolation": 1}, ...}}}
//
// "probes" (optional): the workload's greedy replies from sparkglm-serve on the checkpoint, each
// named (case, grader) judged by the share of the case's requests it passes
// (gates/quality_probes.h). Graders of the workload without a target are measured and recorded,
// not judged: the trained tinyGLM is too small to solve them (arithmetic, needle).
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace sparkglm::gates {

struct ProbeTargets {
  std::string workload;  // a workload id of workloads/
  // case id -> grader name -> the least share of the case's requests that must pass, in [0, 1]
  std::map<std::string, std::map<std::string, double>> min_pass_rate;
};

struct QualityTargets {
  std::string checkpoint;  // the trained weights (a directory sparkglm-serve --model loads)
  std::string heldout;     // their held-out set
  int chunk = 256;         // prefill chunk, as the server cuts prompts
  double max_nll_ratio = 1;
  double max_task_nll_ratio = 1;
  double max_accuracy_drop = 0;
  double reference_nll = 0;
  double reference_accuracy = 0;
  std::map<std::string, double> reference_task_nll;
  std::optional<ProbeTargets> probes;

  // The section as parse_quality_targets reads it (without "note"): what a quality bundle records
  // as the targets it was judged by.
  nlohmann::json to_json() const;
};

// Errors name `where` and the field.
QualityTargets parse_quality_targets(const nlohmann::json& j, const std::string& where);

}  // namespace sparkglm::gates
