// run_qualification: the order of a qualification run. G0 and G1 need no server; the serving gates
// this machine can run are driven through their arms (qualification_arms.h) with their workloads
// (qualification_workloads.h) and judged; every gate up to the one asked for that was not
// evaluated is `not-run` with the reason; qualification_record.h writes and verifies the bundle.
#include "gates/qualification_run.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "gates/case_metrics.h"
#include "gates/change_class_policy.h"
#include "gates/gate_definition.h"
#include "gates/operator_gate.h"
#include "gates/qualification_arms.h"
#include "gates/qualification_record.h"
#include "gates/qualification_workloads.h"
#include "gates/serving_evidence.h"
#include "gates/serving_gate.h"
#include "gates/static_gate.h"
#include "harness/ab_runner.h"
#include "harness/run_environment.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_writer.h"

namespace sparkglm::gates {

namespace fs = std::filesystem;
using nlohmann::json;

int run_qualification(const RunRequest& req, std::ostream& out, std::ostream& err) {
  const int top = gate_level(req.gate);
  const ChangeClassPolicy policy = ChangeClassPolicy::load(req.gates.string());
  const ChangeClass& cls = policy.at(req.change_class);
  std::vector<GateDefinition> defs;
  for (int g = 0; g <= 5; ++g)
    defs.push_back(load_gate(req.gates.string(), "G" + std::to_string(g)));
  receipts::BundleWriter bundle(req.out);
  const auto epoch = harness::Clock::now();
  const bool gpu = harness::gpu_present();
  QualificationRecord rec;
  std::vector<GateResult>& results = rec.results;
  std::vector<std::string>& limitations = rec.limitations;

  // G0 and G1 need no server.
  results.push_back(
      evaluate_static_gate(defs[0], {req.receipts, req.profiles, req.gates, req.ctest_dir}));
  err << "G0: " << results.back().status << " (" << results.back().summary << ")\n";
  if (top >= 1) {
    // A server measured through --url was not built here: this machine's operator runner says
    // nothing about its kernels (and would compete with it for the device), unless a table made
    // for it is given.
    results.push_back(req.external && req.operators_json.empty()
                          ? not_run(defs[1].id,
                                    "not applicable: the server under test (--url) was not built "
                                    "here; give --operators with its table to judge G1")
                          : evaluate_operator_gate(defs[1], req.operators_json, req.operator_runner,
                                                   gpu, bundle, err));
    err << "G1: " << results.back().status << " (" << results.back().summary << ")\n";
    if (results.back().status != "not-run") {
      const auto speed = operator_table_limitations(
          parse_json(receipts::read_file(bundle.where_is("operators.json")), "operators.json",
                     ErrorKind::kInvalidArgument, json_limits::kReceipt));
      limitations.insert(limitations.end(), speed.begin(), speed.end());
    }
  }
  const bool g1_passed = top >= 1 && results.back().status == "pass";

  // The serving gates this machine can run, and the workloads they drive.
  std::vector<const GateDefinition*> serving;
  for (int g = 2; g <= std::min(top, 4); ++g) {
    const GateDefinition& d = defs[size_t(g)];
    if (d.needs == "gpu" && !gpu) {
      results.push_back(not_run(d.id, "needs a GPU (" + d.runs_on + "); nvidia-smi found none"));
    } else if (d.needs == "gpu" && !serves_on_cuda(req.candidate)) {
      results.push_back(
          not_run(d.id, "runs on " + d.runs_on + "; this run's server is not --device cuda"));
    } else {
      serving.push_back(&d);
    }
  }
  std::vector<std::string>& workload_ids = rec.workload_ids;
  for (const GateDefinition* d : serving)
    for (const std::string& w : d->workloads)
      if (std::find(workload_ids.begin(), workload_ids.end(), w) == workload_ids.end())
        workload_ids.push_back(w);
  for (const std::string& w : req.extra_workloads)
    if (std::find(workload_ids.begin(), workload_ids.end(), w) == workload_ids.end())
      workload_ids.push_back(w);

  json& change = rec.change;
  change = {{"class", cls.name},
            {"option", req.option ? json{{"name", req.option->first}, {"value", req.option->second}}
                                  : json(nullptr)},
            {"baseline", nullptr},
            {"candidate", nullptr}};
  ServingRun& run = rec.run;
  if (!workload_ids.empty()) {
    QualificationArms opened = open_arms(req, bundle, err, limitations);
    std::vector<ServingArm>& arms = opened.arms;
    rec.device_share = opened.device_share;
    change["candidate"] = arms[0].identity.identity;
    if (arms.size() > 1) change["baseline"] = arms[1].identity.identity;
    if (req.option) {
      // Typed as the server printed it, so that promotion compares like with like.
      const json& cfg = arms[0].identity.effective_config;
      if (cfg.contains(req.option->first)) change["option"]["value"] = cfg[req.option->first];
    }

    const std::vector<harness::CaseLoad> loads =
        plan_workloads(req, workload_ids, arms[0], bundle, err, run);
    run.records = run_workloads(loads, arms, epoch);

    close_arms(arms, bundle, rec.counters, rec.emit_delays, limitations);
    std::string jsonl;
    for (const harness::RequestRecord& r : run.records) jsonl += harness::to_json(r).dump() + "\n";
    bundle.add_bytes("requests.jsonl", jsonl, "requests");

    rec.client = client_cost(run.records);
    if (const auto warning = bursty_delivery_warning(run.records)) {
      limitations.push_back(*warning);
      err << "warning: " << *warning << '\n';
    }
    run.baseline = req.baseline ? "baseline" : "";
    run.dummy_weights = serves_dummy_weights(arms[0]);
    rec.metrics = case_metrics(run.records, "candidate", run.baseline);
    for (const GateDefinition* d : serving)
      results.push_back(evaluate_serving_gate(*d, run, rec.metrics, cls, g1_passed));
    if (run.dummy_weights)
      limitations.push_back(
          "dummy weights: outputs carry no meaning; quality graders are informational, and "
          "tinyGLM numbers are never full-model throughput");
  }
  if (change["candidate"].is_null()) {
    // No server ran: the candidate is the binary that was judged, the operator runner for G1.
    ArmCommand judged = req.candidate;
    std::error_code ec;
    if (top >= 1 && fs::exists(req.operator_runner, ec))
      judged = {req.operator_runner.string(), {}};
    change["candidate"] = build_identity(judged);
  }
  for (int g = 2; g <= 5; ++g) {
    const std::string gid = "G" + std::to_string(g);
    bool have = false;
    for (const GateResult& r : results) have = have || r.id == gid;
    if (have) continue;
    if (g <= top && g == 5)
      results.push_back(not_run(gid, "runs on " + defs[5].runs_on + ", not here"));
    else if (g <= top)
      results.push_back(not_run(gid, "not evaluated by this run"));
  }
  std::sort(results.begin(), results.end(),
            [](const GateResult& a, const GateResult& b) { return a.id < b.id; });
  if (req.scale < 1)
    limitations.push_back(
        "run at scale " + std::to_string(req.scale) +
        ": prompt and output lengths and repetitions shrunk (workloads/README.md)");
  if (!gpu && !serving.empty())
    limitations.push_back("no GPU on this machine: the CPU reference backend served");

  return finish_qualification(req, rec, bundle, out, err);
}

}  // namespace sparkglm::gates
