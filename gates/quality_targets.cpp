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

}  // namespace

nlohmann::json QualityTargets::to_json() const {
  nlohmann::json tasks = nlohmann::json::object();
  for (const auto& [task, nll] : reference_task_nll) tasks[task] = {{"nll", nll}};
  return {
      {"checkpoint", checkpoint},
      {"heldout", heldout},
      {"chunk", chunk},
      {"max_nll_ratio", max_nll_ratio},
      {"max_task_nll_ratio", max_task_nll_ratio},
      {"max_accuracy_drop", max_accuracy_drop},
      {"reference", {{"nll", reference_nll}, {"accuracy", reference_accuracy}, {"tasks", tasks}}}};
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
  return t;
}

}  // namespace sparkglm::gates
