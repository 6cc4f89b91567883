#pragma once
// A gate as data (gates/G0.json ... G5.json): what it runs on, the workloads it drives and the
// criteria it checks, each with its threshold. The runner evaluates criteria by their `check`; a
// threshold changes by editing the JSON, not the code.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/engine_targets.h"
#include "gates/quality_targets.h"
#include "gates/speculation_targets.h"

namespace sparkglm::gates {

struct Criterion {
  std::string name;    // what a reader sees ("median TTFT")
  std::string check;   // how it is evaluated: no_errors, grader, ratio_at_least, ...
  std::string metric;  // for ratio and verdict checks: the metric name
  std::string grader;  // for `grader`: the workload grader's name
  std::string field;   // for `operators`: the operator-table column
  double factor = 1;   // ratio checks: candidate median vs factor x baseline median
  double plus = 0;     // ratio_at_most_plus: ... + plus (in the metric's unit)
  std::string note;
};

struct GateDefinition {
  std::string id;  // "G0".."G5"
  std::string title;
  std::string runs_on;
  std::string needs;  // "" (runs anywhere), "gpu", or "target-hardware"
  std::vector<std::string> workloads;
  std::vector<Criterion> criteria;
  std::optional<EngineTargets> engine_targets;    // "engine_targets" (G2): what `measure` judges
  std::optional<QualityTargets> quality_targets;  // "quality_targets" (G2): what `quality` judges
  // "speculation_targets" (G2): what `measure --speculation-bench` judges
  std::optional<SpeculationTargets> speculation_targets;
  std::string sha256;  // of the definition file's bytes
};

// Errors name the file and the field.
GateDefinition load_gate(const std::string& gates_dir, const std::string& id);
bool is_gate_id(const std::string& id);  // G0..G5

// A JSON file of gates/ with the sha256 of its bytes; errors name the file.
struct GateFile {
  nlohmann::json json;
  std::string sha256;
};
GateFile read_gate_file(const std::string& path);
int gate_level(const std::string& id);  // "G3" -> 3

// One evaluated criterion and one evaluated gate, in qualification.json's shape.
struct CriterionResult {
  std::string name;
  nlohmann::json observed;
  nlohmann::json threshold;
  bool pass = false;
  std::string note;
};

struct GateResult {
  std::string id;
  std::string status;  // pass | fail | not-run | not-applicable
  std::string summary;
  std::vector<CriterionResult> criteria;

  // pass when every criterion passed, fail otherwise; the summary counts them.
  void conclude();
  nlohmann::json to_json() const;
};

GateResult not_run(const std::string& id, const std::string& why);

}  // namespace sparkglm::gates
