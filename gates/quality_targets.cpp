#include "gates/quality_targets.h"

#include "engine/core/error.h"

namespace sparkglm::gates {

namespace {

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number())
    throw Error(ErrorKind::kInvalidConfig, where + "." + key + ": expected a number");
  return j[key].get<double>();
}

std::string text(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string() || j[key] == "")
    throw Error(ErrorKind::kInvalidConfig, where + "." + key + ": expected a non-empty string");
  return j[key];
}

// The probes' targets: a workload id and, per case, per grader, a share in [0, 1]; at most 64
// cases of 16 graders (a workload's own bounds are smaller).
ProbeTargets parse_probe_targets(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object() || j.size() != 2 || !j.contains("min_pass_rate"))
    throw Error(ErrorKind::kInvalidConfig,
                where + ": expected {\"workload\": ..., \"min_pass_rate\": {...}}");
  ProbeTargets t;
  t.workload = text(j, "workload", where);
  const nlohmann::json& cases = j["min_pass_rate"];
  const std::string at = where + ".min_pass_rate";
  if (!cases.is_object() || cases.empty() || cases.size() > 64)
    throw Error(ErrorKind::kInvalidConfig, at + ": expected an object of 1 to 64 cases");
  for (const auto& [id, graders] : cases.items()) {
    if (!graders.is_object() || graders.empty() || graders.size() > 16)
      throw Error(ErrorKind::kInvalidConfig,
                  at + "." + id + ": expected an object of 1 to 16 graders");
    for (const auto& [grader, share] : graders.items()) {
      if (!share.is_number() || !(share.get<double>() >= 0) || !(share.get<double>() <= 1))
        throw Error(ErrorKind::kInvalidConfig,
                    at + "." + id + "." + grader + ": expected a share in [0, 1]");
      t.min_pass_rate[id][grader] = share.get<double>();
    }
  }
  return t;
}

}  // namespace

nlohmann::json QualityTargets::to_json() const {
  nlohmann::json tasks = nlohmann::json::object();
  for (const auto& [task, nll] : reference_task_nll) tasks[task] = {{"nll", nll}};
  nlohmann::json j = {
      {"checkpoint", checkpoint},
      {"heldout", heldout},
      {"chunk", chunk},
      {"max_nll_ratio", max_nll_ratio},
      {"max_task_nll_ratio", max_task_nll_ratio},
      {"max_accuracy_drop", max_accuracy_drop},
      {"reference", {{"nll", reference_nll}, {"accuracy", reference_accuracy}, {"tasks", tasks}}}};
  if (probes)
    j["probes"] = {{"workload", probes->workload}, {"min_pass_rate", probes->min_pass_rate}};
  return j;
}

QualityTargets parse_quality_targets(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(ErrorKind::kInvalidConfig, where + ": expected an object");
  QualityTargets t;
  t.checkpoint = text(j, "checkpoint", where);
  t.heldout = text(j, "heldout", where);
  t.chunk = int(number(j, "chunk", where));
  t.max_nll_ratio = number(j, "max_nll_ratio", where);
  t.max_task_nll_ratio = number(j, "max_task_nll_ratio", where);
  t.max_accuracy_drop = number(j, "max_accuracy_drop", where);
  if (t.chunk < 1 || !(t.max_nll_ratio >= 1) || !(t.max_task_nll_ratio >= 1) ||
      !(t.max_accuracy_drop >= 0))
    throw Error(ErrorKind::kInvalidConfig, where +
                                               ": chunk >= 1, max_nll_ratio >= 1, "
                                               "max_task_nll_ratio >= 1 and max_accuracy_drop >= 0 "
                                               "expected");
  if (!j.contains("reference") || !j["reference"].is_object())
    throw Error(ErrorKind::kInvalidConfig, where + ".reference: expected an object");
  const nlohmann::json& r = j["reference"];
  t.reference_nll = number(r, "nll", where + ".reference");
  t.reference_accuracy = number(r, "accuracy", where + ".reference");
  if (!r.contains("tasks") || !r["tasks"].is_object() || r["tasks"].empty())
    throw Error(ErrorKind::kInvalidConfig, where + ".reference.tasks: expected an object");
  for (const auto& [task, v] : r["tasks"].items())
    t.reference_task_nll[task] = number(v, "nll", where + ".reference.tasks." + task);
  if (j.contains("probes")) t.probes = parse_probe_targets(j["probes"], where + ".probes");
  return t;
}

}  // namespace sparkglm::gates
