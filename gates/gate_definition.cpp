#include "gates/gate_definition.h"

#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "receipts/bundle_file.h"

namespace sparkglm::gates {
namespace {

std::string string_field(const nlohmann::json& j, const char* key, const std::string& where,
                         bool required) {
  if (!j.contains(key)) {
    if (required) throw Error(ErrorKind::kInvalidConfig, where + ": missing \"" + key + "\"");
    return "";
  }
  if (!j[key].is_string())
    throw Error(ErrorKind::kInvalidConfig, where + "." + key + ": expected a string");
  return j[key].get<std::string>();
}

double number_field(const nlohmann::json& j, const char* key, const std::string& where,
                    double fallback) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number())
    throw Error(ErrorKind::kInvalidConfig, where + "." + key + ": expected a number");
  return j[key].get<double>();
}

const char* const kChecks[] = {"receipts_verify",
                               "index_fresh",
                               "profiles_backed",
                               "ctest",
                               "operators",
                               "no_errors",
                               "grader",
                               "token_ids_match_baseline",
                               "ratio_at_least",
                               "ratio_at_most_plus",
                               "verdict_not_worse",
                               "manual"};

}  // namespace

bool is_gate_id(const std::string& id) {
  return id.size() == 2 && id[0] == 'G' && id[1] >= '0' && id[1] <= '5';
}

int gate_level(const std::string& id) {
  if (!is_gate_id(id)) throw Error(ErrorKind::kInvalidArgument, "not a gate: \"" + id + "\"");
  return id[1] - '0';
}

GateFile read_gate_file(const std::string& path) {
  const std::string bytes = receipts::read_file(path, json_limits::kGate.max_bytes);
  GateFile file;
  file.json = parse_json(bytes, path, ErrorKind::kInvalidConfig, json_limits::kGate);
  file.sha256 = sha256_hex(bytes);
  return file;
}

GateDefinition load_gate(const std::string& gates_dir, const std::string& id) {
  if (!is_gate_id(id))
    throw Error(ErrorKind::kInvalidArgument, "--gate: expected one of G0..G5, got \"" + id + "\"");
  const std::string path = (std::filesystem::path(gates_dir) / (id + ".json")).string();
  const GateFile file = read_gate_file(path);
  const nlohmann::json& j = file.json;
  GateDefinition g;
  g.sha256 = file.sha256;
  g.id = string_field(j, "id", path, true);
  if (g.id != id) throw Error(ErrorKind::kInvalidConfig, path + ".id: expected \"" + id + "\"");
  g.title = string_field(j, "title", path, true);
  g.runs_on = string_field(j, "runs_on", path, true);
  g.needs = string_field(j, "requires", path, false);
  if (!g.needs.empty() && g.needs != "gpu" && g.needs != "target-hardware")
    throw Error(ErrorKind::kInvalidConfig, path + ".requires: expected gpu or target-hardware");
  for (const auto& w : j.value("workloads", nlohmann::json::array())) {
    if (!w.is_string())
      throw Error(ErrorKind::kInvalidConfig, path + ".workloads: expected strings");
    g.workloads.push_back(w.get<std::string>());
  }
  if (!j.contains("criteria") || !j["criteria"].is_array() || j["criteria"].empty())
    throw Error(ErrorKind::kInvalidConfig, path + ".criteria: expected a non-empty array");
  for (size_t i = 0; i < j["criteria"].size(); ++i) {
    const nlohmann::json& c = j["criteria"][i];
    const std::string where = path + ".criteria[" + std::to_string(i) + "]";
    Criterion k;
    k.name = string_field(c, "name", where, true);
    k.check = string_field(c, "check", where, true);
    bool known = false;
    for (const char* check : kChecks) known = known || k.check == check;
    if (!known)
      throw Error(ErrorKind::kInvalidConfig, where + ".check: unknown \"" + k.check + "\"");
    k.metric = string_field(c, "metric", where,
                            k.check.rfind("ratio_", 0) == 0 || k.check == "verdict_not_worse");
    k.grader = string_field(c, "grader", where, k.check == "grader");
    k.field = string_field(c, "field", where, k.check == "operators");
    k.factor = number_field(c, "factor", where, 1.0);
    k.plus = number_field(c, "plus", where, 0.0);
    k.note = string_field(c, "note", where, false);
    g.criteria.push_back(k);
  }
  if (j.contains("engine_targets"))
    g.engine_targets = parse_engine_targets(j["engine_targets"], path + ".engine_targets");
  if (j.contains("quality_targets"))
    g.quality_targets = parse_quality_targets(j["quality_targets"], path + ".quality_targets");
  if (j.contains("speculation_targets"))
    g.speculation_targets =
        parse_speculation_targets(j["speculation_targets"], path + ".speculation_targets");
  return g;
}

void GateResult::conclude() {
  int passed = 0;
  for (const CriterionResult& c : criteria) passed += c.pass ? 1 : 0;
  const int total = static_cast<int>(criteria.size());
  status = passed == total ? "pass" : "fail";
  std::string failed;
  for (const CriterionResult& c : criteria)
    if (!c.pass) failed += (failed.empty() ? "" : "; ") + c.name;
  summary = std::to_string(passed) + " of " + std::to_string(total) + " criteria passed" +
            (failed.empty() ? "" : " (failed: " + failed + ")") +
            (summary.empty() ? "" : "; " + summary);
}

nlohmann::json GateResult::to_json() const {
  nlohmann::json c = nlohmann::json::array();
  for (const CriterionResult& r : criteria) {
    nlohmann::json e = {
        {"name", r.name}, {"observed", r.observed}, {"threshold", r.threshold}, {"pass", r.pass}};
    if (!r.note.empty()) e["note"] = r.note;
    c.push_back(e);
  }
  return {{"id", id}, {"status", status}, {"summary", summary}, {"criteria", c}};
}

GateResult not_run(const std::string& id, const std::string& why) {
  GateResult r;
  r.id = id;
  r.status = "not-run";
  r.summary = why;
  return r;
}

}  // namespace sparkglm::gates
