#include "gates/verdict_rederivation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "gates/case_metrics.h"
#include "gates/change_class_policy.h"
#include "gates/engine_inputs.h"
#include "gates/engine_measurement.h"
#include "gates/engine_targets.h"
#include "gates/gate_definition.h"
#include "gates/operator_gate.h"
#include "gates/quality_bundle.h"
#include "gates/serving_gate.h"
#include "gates/speculation_bundle.h"
#include "harness/request_record.h"
#include "receipts/bundle_file.h"
#include "workloads/request_plan.h"
#include "workloads/workload_spec.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using receipts::Problem;
using receipts::Problems;

const std::string kManifest = "qualification.json: ";
// The run writes metrics with this minimum effect (gates/qualification_run.cpp); a verdict is
// re-derived under the same.
constexpr double kMinEffectPct = 5.0;

std::string text_of(const json& obj, const char* key) {
  const auto it = obj.is_object() ? obj.find(key) : obj.end();
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string shown(const json& v) {
  const std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 120 ? text.substr(0, 117) + "..." : text;
}

bool has_artifact(const fs::path& bundle, const json& record, const std::string& path) {
  bool listed = false;
  for (const json& a : record.value("artifacts", json::array()))
    listed = listed || (a.is_object() && text_of(a, "path") == path);
  std::error_code ec;
  return listed && fs::is_regular_file(fs::symlink_status(bundle / path, ec));
}

json read_artifact(const fs::path& bundle, const std::string& path) {
  return parse_json_unique_keys(receipts::read_file(bundle / path), path,
                                ErrorKind::kInvalidArgument);
}

// The recorded gate against the one judged again: the verdict, then each criterion by name.
void compare_gate(const json& recorded, const GateResult& derived, const std::string& at,
                  Problems& problems) {
  const std::string id = derived.id;
  if (derived.status != "pass")
    problems.push_back({at + ".status", "marked pass, but " + id +
                                            " re-derived from the raw "
                                            "records is " +
                                            derived.status + " (" + derived.summary + ")"});
  const json criteria = recorded.value("criteria", json::array());  // by_name points into it
  std::map<std::string, const json*> by_name;
  for (const json& c : criteria)
    if (c.is_object()) by_name[text_of(c, "name")] = &c;
  std::set<std::string> derived_names;
  for (const CriterionResult& c : derived.criteria) {
    derived_names.insert(c.name);
    const auto it = by_name.find(c.name);
    if (it == by_name.end()) {
      problems.push_back({at + ".criteria",
                          "lacks \"" + c.name + "\", which " + id +
                              " yields for this bundle (re-derived: " + (c.pass ? "pass" : "fail") +
                              ", observed " + shown(c.observed) + ")"});
      continue;
    }
    const json& r = *it->second;
    if (r.value("pass", !c.pass) != c.pass || !close_json(r.value("observed", json()), c.observed))
      problems.push_back({at + ".criteria \"" + c.name + "\"",
                          "says " + std::string(r.value("pass", false) ? "pass" : "fail") +
                              " with observed " + shown(r.value("observed", json())) +
                              "; re-derived: " + (c.pass ? "pass" : "fail") + " with observed " +
                              shown(c.observed)});
  }
  for (const auto& [name, _] : by_name)
    if (!derived_names.count(name))
      problems.push_back(
          {at + ".criteria \"" + name + "\"", "not a criterion " + id +
                                                  " yields for this bundle: its definition "
                                                  "(gates/" +
                                                  id + ".json) and raw records do not produce it"});
}

// The serving run as the bundle holds it: records, the workload specs as they ran (scaled as the
// record says), and their plans made again without a server (the graders read counts and
// expected answers from the plan, not the calibrated prompt text).
ServingRun serving_run(const fs::path& bundle, const json& record,
                       std::vector<harness::RequestRecord> records) {
  ServingRun run;
  run.records = std::move(records);
  const json& change = record.at("change");
  run.baseline = change.value("baseline", json()).is_null() ? "" : "baseline";
  const json candidate = change.value("candidate", json::object());
  run.dummy_weights =
      candidate.is_object() &&
      candidate.value("model", json::object()).value("weights", "").rfind("dummy", 0) == 0;
  for (const json& w : record.at("workloads")) {
    const std::string id = text_of(w, "id");
    workloads::WorkloadSpec spec = workloads::scaled(
        workloads::load_workload((bundle / ("workloads/" + id + ".json")).string()),
        w.value("scale", 1.0));
    run.specs[id] = spec;
  }
  // `run --repetitions N` replaces every case's measured repetitions with N; the records show it
  // as one count shared by every case that differs from the specs.
  std::set<int32_t> counts;
  bool differs = false;
  for (const auto& [id, spec] : run.specs)
    for (const workloads::CaseSpec& c : spec.cases) {
      std::set<int32_t> reps;
      for (const harness::RequestRecord& r : run.records)
        if (r.arm == run.candidate && r.workload == id && r.case_id == c.id && r.repetition >= 0)
          reps.insert(r.repetition);
      counts.insert(int32_t(reps.size()));
      differs = differs || int32_t(reps.size()) != c.repetitions;
    }
  if (differs && counts.size() == 1 && *counts.begin() > 0)
    for (auto& [id, spec] : run.specs)
      for (workloads::CaseSpec& c : spec.cases) c.repetitions = *counts.begin();
  for (const auto& [id, spec] : run.specs) run.plans[id] = workloads::plan_workload(spec, {});
  return run;
}

GateResult judge_engine_bundle(const fs::path& bundle, const json& record,
                               const GateDefinition& g2) {
  if (!g2.engine_targets)
    throw Error(ErrorKind::kInvalidConfig, "G2.json: no \"engine_targets\" to judge it by");
  std::vector<json> benches;
  for (const json& a : record.at("artifacts")) {
    const std::string path = text_of(a, "path");
    if (path.rfind("runner-bench/", 0) != 0 || !path.ends_with(".json")) continue;
    benches.push_back(read_artifact(bundle, path));
    check_runner_bench(benches.back(), path);
  }
  if (benches.empty())
    throw Error(ErrorKind::kInvalidArgument, "no requests.jsonl and no runner-bench/*.json");
  json peer;
  if (has_artifact(bundle, record, "torch-peer.json")) {
    peer = read_artifact(bundle, "torch-peer.json");
    check_torch_peer(peer, "torch-peer.json");
  }
  std::vector<std::string> limitations;
  return judge_engine_targets(benches, peer, *g2.engine_targets, limitations);
}

// The current definition of gate `id`, then every superseded one kept in <gates>/history/.
std::vector<GateDefinition> definitions_of(const fs::path& gates_dir, const std::string& id) {
  std::vector<GateDefinition> out = {load_gate(gates_dir.string(), id)};
  std::vector<fs::path> older;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(gates_dir / "history", ec))
    if (entry.is_directory() && fs::exists(entry.path() / (id + ".json"))) older.push_back(entry);
  std::sort(older.begin(), older.end());
  for (const fs::path& dir : older) {
    GateDefinition d = load_gate(dir.string(), id);
    if (d.sha256 != out.front().sha256) out.push_back(std::move(d));
  }
  return out;
}

void compare_metrics(const json& record, const std::vector<MetricSeries>& series,
                     Problems& problems) {
  std::map<std::string, json> derived;
  std::set<std::string> computed, recorded;  // metric names
  for (const MetricSeries& m : series) {
    derived[m.name + " @ " + m.workload + "/" + m.case_id] = metric_to_json(m, kMinEffectPct);
    computed.insert(m.name);
  }
  std::set<std::string> seen;
  const json metrics = record.value("metrics", json::array());
  for (const json& m : metrics) recorded.insert(text_of(m, "name"));
  for (size_t i = 0; i < metrics.size(); ++i) {
    const json& m = metrics[i];
    // A name the project no longer computes (renamed since the bundle was written) cannot be
    // computed again; it stays as written, and is never a gate's input today.
    if (!computed.count(text_of(m, "name"))) continue;
    const std::string key =
        text_of(m, "name") + " @ " + text_of(m, "workload") + "/" + text_of(m, "case");
    const std::string at = kManifest + "metrics[" + std::to_string(i) + "]";
    const auto it = derived.find(key);
    if (it == derived.end()) {
      problems.push_back({at, key + " does not come from requests.jsonl (no such metric or case "
                                    "in the raw records)"});
      continue;
    }
    seen.insert(key);
    for (const char* field :
         {"unit", "direction", "n", "baseline", "candidate", "change_pct", "ci95", "p", "verdict"})
      if (!close_json(m.value(field, json()), it->second[field]))
        problems.push_back({at + "." + field, key + " says " + shown(m.value(field, json())) +
                                                  "; requests.jsonl gives " +
                                                  shown(it->second[field])});
  }
  for (const auto& [key, value] : derived)
    if (!seen.count(key) && recorded.count(value["name"].get<std::string>()))
      problems.push_back({kManifest + "metrics",
                          "lacks " + key + ", which requests.jsonl gives (a metric left out)"});
}

}  // namespace

std::vector<harness::RequestRecord> read_requests(const fs::path& bundle) {
  std::vector<harness::RequestRecord> records;
  std::istringstream lines(receipts::read_file(bundle / "requests.jsonl"));
  std::string line;
  for (size_t n = 1; std::getline(lines, line); ++n)
    if (!line.empty())
      records.push_back(harness::record_from_json(parse_json_unique_keys(
          line, "requests.jsonl: line " + std::to_string(n), ErrorKind::kInvalidArgument)));
  return records;
}

bool close_json(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return x == y || std::fabs(x - y) <= 1e-9 * std::max(std::fabs(x), std::fabs(y));
  }
  if (a.type() != b.type() || a.size() != b.size()) return false;
  if (a.is_array()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (!close_json(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    for (const auto& [key, value] : a.items())
      if (!b.contains(key) || !close_json(value, b[key])) return false;
    return true;
  }
  return a == b;
}

Problems rederive_verdicts(const fs::path& bundle, const json& record,
                           const receipts::VerifyOptions& options) {
  if (is_quality_record(record)) {
    try {
      return rederive_quality(bundle, record, definitions_of(options.gates, "G2"));
    } catch (const std::exception& e) {
      return {{kManifest + "gates",
               "G2 cannot be read to judge a quality bundle: " + std::string(e.what())}};
    }
  }
  if (is_speculation_record(record)) {
    try {
      return rederive_speculation(bundle, record, definitions_of(options.gates, "G2"));
    } catch (const std::exception& e) {
      return {{kManifest + "gates",
               "G2 cannot be read to judge a speculation bundle: " + std::string(e.what())}};
    }
  }
  Problems problems;
  const std::string gates_dir = options.gates.string();
  const bool has_requests = has_artifact(bundle, record, "requests.jsonl");
  std::optional<std::vector<harness::RequestRecord>> records;
  try {
    if (has_requests) records = read_requests(bundle);
  } catch (const Error& e) {
    return {{"requests.jsonl", "cannot be read again to re-derive verdicts: " + e.message()}};
  }
  if (records) {
    const bool two_arms = !record.at("change").value("baseline", json()).is_null();
    try {
      compare_metrics(record, case_metrics(*records, "candidate", two_arms ? "baseline" : ""),
                      problems);
    } catch (const Error& e) {
      problems.push_back({"requests.jsonl", "metrics cannot be computed again: " + e.message()});
    }
  }
  const json gates = record.value("gates", json::array());
  std::optional<ServingRun> run;  // planned once, for every serving gate
  std::string g1_status;
  for (const json& g : gates)
    if (text_of(g, "id") == "G1") g1_status = text_of(g, "status");
  // The problems of one gate judged under one definition.
  const auto judge = [&](const json& gate, const GateDefinition& definition,
                         const std::string& at) {
    Problems found;
    const std::string& id = definition.id;
    if (id == "G0") {
      std::set<std::string> names;
      for (const Criterion& c : definition.criteria) names.insert(c.name);
      for (const json& c : gate.value("criteria", json::array()))
        if (!names.count(text_of(c, "name")))
          found.push_back({at + ".criteria \"" + text_of(c, "name") + "\"",
                           "not a criterion of G0 (gates/G0.json)"});
    } else if (id == "G1") {
      if (!has_artifact(bundle, record, "operators.json"))
        found.push_back({at,
                         "G1 marked pass, but the bundle holds no operators.json to re-derive "
                         "it from"});
      else
        compare_gate(gate,
                     judge_operator_table(definition, read_artifact(bundle, "operators.json")), at,
                     found);
    } else if (id == "G5") {
      found.push_back({at,
                       "G5 marked pass, but it runs on target hardware and no raw record of "
                       "it is defined here: the pass cannot be re-derived"});
    } else if (records) {
      if (!run) run = serving_run(bundle, record, *records);
      std::string absent;
      for (const std::string& w : definition.workloads)
        if (!run->specs.count(w)) absent += (absent.empty() ? "" : ", ") + w;
      if (!absent.empty()) {
        found.push_back({at, id + " marked pass, but it drives " + absent +
                                 ", which this bundle did not run (no workloads[] entry)"});
        return found;
      }
      const ChangeClassPolicy policy = ChangeClassPolicy::load(gates_dir);
      const std::vector<MetricSeries> metrics =
          case_metrics(run->records, run->candidate, run->baseline);
      compare_gate(gate,
                   evaluate_serving_gate(definition, *run, metrics,
                                         policy.at(text_of(record.at("change"), "class")),
                                         g1_status == "pass"),
                   at, found);
    } else if (id == "G2") {
      compare_gate(gate, judge_engine_bundle(bundle, record, definition), at, found);
    } else {
      found.push_back({at, id + " marked pass, but the bundle holds no requests.jsonl to "
                                "re-derive it from"});
    }
    return found;
  };
  for (size_t i = 0; i < gates.size(); ++i) {
    const json& gate = gates[i];
    if (text_of(gate, "status") != "pass") continue;
    const std::string id = text_of(gate, "id");
    const std::string at = kManifest + "gates[" + std::to_string(i) + "]";
    try {
      // The current definition first; a bundle judged by a superseded one that was committed
      // re-derives under that one (gates/history/README.md).
      const std::vector<GateDefinition> definitions = definitions_of(options.gates, id);
      // Shown when none re-derives: the closest definition, one whose workloads the bundle ran
      // before one that drives workloads it never ran.
      const auto distance = [](const Problems& p) {
        const bool unrun = p.size() == 1 && p[0].what.find("did not run") != std::string::npos;
        return unrun ? std::numeric_limits<size_t>::max() : p.size();
      };
      Problems current = judge(gate, definitions.front(), at);
      for (size_t d = 1; d < definitions.size() && !current.empty(); ++d) {
        Problems older = judge(gate, definitions[d], at);
        if (distance(older) < distance(current)) current = std::move(older);
      }
      if (!current.empty() && definitions.size() > 1)
        current.back().what += " (judged by the closest of the current definition and the " +
                               std::to_string(definitions.size() - 1) +
                               " superseded one(s) in gates/history/; none re-derives this pass)";
      problems.insert(problems.end(), current.begin(), current.end());
    } catch (const std::exception& e) {
      // A spec that no longer parses, a definition that cannot be read: the pass is not
      // re-derived, so it does not count.
      problems.push_back({at, id + " marked pass, but it cannot be re-derived: " + e.what()});
    }
  }
  return problems;
}

Problems compare_judged_gate(const json& recorded, const GateResult& derived, const std::string& at,
                             const std::string& judged_from) {
  Problems p;
  const std::string status = recorded.value("status", "");
  if (status != derived.status)
    p.push_back({at + ".status", "says " + shown(status) + "; judged again from " + judged_from +
                                     " it is " + derived.status + " (" + derived.summary + ")"});
  const json want = derived.to_json()["criteria"];
  const json got = recorded.value("criteria", json::array());
  if (got.size() != want.size()) {
    p.push_back({at + ".criteria", std::to_string(got.size()) +
                                       " criteria; judged again: " + std::to_string(want.size())});
    return p;
  }
  for (size_t i = 0; i < want.size(); ++i)
    if (!close_json(got[i], want[i]))
      p.push_back({at + ".criteria[" + std::to_string(i) + "]",
                   "says " + shown(got[i]) + "; judged again: " + shown(want[i])});
  return p;
}

receipts::VerifyOptions full_verification(const fs::path& trusted_keys, const fs::path& gates) {
  receipts::VerifyOptions options;
  options.trusted_keys = trusted_keys;
  options.gates = gates;
  options.verdicts = rederive_verdicts;
  return options;
}

}  // namespace sparkglm::gates
