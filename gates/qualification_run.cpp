#include "gates/qualification_run.h"

#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/core/build_info.h"
#include "engine/core/error.h"
#include "gates/case_metrics.h"
#include "gates/change_class_policy.h"
#include "gates/gate_definition.h"
#include "gates/operator_gate.h"
#include "gates/serving_gate.h"
#include "gates/static_gate.h"
#include "harness/ab_runner.h"
#include "harness/request_metrics.h"
#include "harness/run_environment.h"
#include "harness/server_api.h"
#include "harness/server_identity.h"
#include "harness/server_process.h"
#include "harness/statistics.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/bundle_writer.h"
#include "reports/progress_line.h"
#include "reports/report_commands.h"
#include "workloads/prompt_builder.h"
#include "workloads/request_plan.h"
#include "workloads/workload_spec.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One started server with what it said about itself.
struct Arm {
  std::string label;
  std::unique_ptr<harness::ServerProcess> server;
  harness::ServerIdentity identity;
  std::string metrics_before;
};

Arm start_arm(const std::string& label, const ArmCommand& cmd, receipts::BundleWriter& bundle,
              std::ostream& err) {
  const std::string log = "server/" + label + "/server.log";
  bundle.add_file(log, "log");
  harness::ServerProcessOptions o;
  o.binary = cmd.binary;
  o.args = cmd.args;
  o.log_path = bundle.where_is(log).string();
  fs::create_directories(bundle.where_is(log).parent_path());
  err << "starting " << label << ": " << cmd.binary;
  for (const std::string& a : cmd.args) err << ' ' << a;
  err << '\n';
  Arm arm;
  arm.label = label;
  arm.server = std::make_unique<harness::ServerProcess>(o);
  std::vector<std::string> argv = {cmd.binary};
  argv.insert(argv.end(), cmd.args.begin(), cmd.args.end());
  arm.identity = harness::read_server_identity(label, argv, receipts::read_file(o.log_path));
  bundle.add_bytes("server/" + label + "/effective-config.json",
                   arm.identity.effective_config.dump(2) + "\n", "config");
  bundle.add_bytes("server/" + label + "/identity.json", arm.identity.identity.dump(2) + "\n",
                   "identity");
  arm.metrics_before = harness::http_get(arm.server->base_url() + "/metrics").body;
  bundle.add_bytes("server/" + label + "/metrics-before.txt", arm.metrics_before, "metrics");
  return arm;
}

// Both arms must serve the same model: an A/B of two models measures nothing.
void check_arms_comparable(const std::vector<Arm>& arms) {
  if (arms.size() < 2) return;
  const json& a = arms[0].identity.identity["model"];
  const json& b = arms[1].identity.identity["model"];
  if (a != b)
    throw Error(ErrorKind::kInvalidArgument, "the arms serve different models (change.*.model): " +
                                                 a.dump() + " vs " + b.dump());
}

std::vector<harness::CaseLoad> case_loads(const workloads::WorkloadPlan& plan) {
  std::vector<harness::CaseLoad> out;
  for (const workloads::CasePlan& c : plan.cases) {
    harness::CaseLoad load;
    load.label = plan.workload_id + "/" + c.case_id;
    load.arrival = c.arrival;
    for (const workloads::RepetitionPlan& r : c.repetitions) {
      harness::Repetition rep{r.repetition, r.requests};
      for (harness::RequestSpec& s : rep.requests) s.workload = plan.workload_id;
      load.repetitions.push_back(std::move(rep));
    }
    out.push_back(std::move(load));
  }
  return out;
}

// The candidate's identity when no server ran (G0, G1): the binary as built, not started.
json build_identity(const ArmCommand& cmd) {
  const BuildInfo& b = build_info();
  std::error_code ec;
  return {{"label", "candidate"},
          {"commit", b.commit},
          {"clean_tree", std::string(b.clean_tree) == "true"},
          {"binary_sha256",
           fs::exists(cmd.binary, ec) ? harness::file_sha256(cmd.binary) : std::string(64, '0')},
          {"profile", ""},
          {"profile_sha256", ""},
          {"effective_config_sha256", ""},
          {"model", {{"preset", ""}, {"config_sha256", ""}, {"weights", ""}}},
          {"device", "not started"},
          {"args", cmd.args}};
}

bool serves_on_cuda(const ArmCommand& cmd) {
  for (size_t i = 0; i < cmd.args.size(); ++i)
    if (cmd.args[i] == "--device=cuda" ||
        (cmd.args[i] == "--device" && i + 1 < cmd.args.size() && cmd.args[i + 1] == "cuda"))
      return true;
  return false;
}

bool dummy_weights(const Arm& arm) {
  return arm.identity.identity["model"].value("weights", "").rfind("dummy", 0) == 0;
}

// The client's own cost per event against the gaps it timed (QUALIFICATION.md: it must stay far
// below them); recorded so that a reader can judge every ITL in the bundle.
json client_cost(const std::vector<harness::RequestRecord>& records) {
  std::vector<double> overhead;
  double overhead_max = 0;
  for (const harness::RequestRecord& r : records)
    if (r.ok && r.client_overhead_median_s > 0) {
      overhead.push_back(r.client_overhead_median_s);
      overhead_max = std::max(overhead_max, r.client_overhead_max_s);
    }
  const auto share = harness::client_overhead_to_itl(records);
  return {{"overhead_per_event_median_s", overhead.empty() ? 0.0 : harness::median(overhead)},
          {"overhead_per_event_max_s", overhead_max},
          {"worst_median_overhead_over_median_itl", share ? json(*share) : json(nullptr)}};
}

// Feeds the terminal progress line: the case and arm about to run, and each finished request.
harness::RunProgress progress_hooks(const std::vector<harness::CaseLoad>& loads, size_t arms,
                                    harness::Clock::time_point epoch, reports::ProgressLine& line,
                                    reports::Progress& progress) {
  progress.total = 0;
  for (const harness::CaseLoad& l : loads)
    for (const harness::Repetition& r : l.repetitions)
      progress.total += int64_t(r.requests.size() * arms);
  harness::RunProgress hooks;
  hooks.begin = [&loads, &progress](const std::string& label, int32_t rep, const std::string& arm,
                                    size_t) {
    progress.case_id = label + " [" + arm + "]";
    progress.repetition = rep;
    for (const harness::CaseLoad& l : loads)
      if (l.label == label) {
        progress.repetitions = 0;
        for (const harness::Repetition& r : l.repetitions) progress.repetitions += r.number >= 0;
      }
  };
  hooks.request_done = [&line, &progress, epoch](const harness::RequestRecord&, size_t, size_t) {
    ++progress.done;
    progress.elapsed_s = std::chrono::duration<double>(harness::Clock::now() - epoch).count();
    line.update(progress);
  };
  return hooks;
}

// QUALIFICATION.md: counters are reported as deltas over the run, never cumulative. Every
// Prometheus counter (`*_total`) the server exposes, after minus before, per arm.
json counter_deltas(const std::string& before_text, const std::string& after_text) {
  json out = json::object();
  try {
    const auto before = harness::parse_prometheus_text(before_text);
    for (const auto& [name, value] : harness::parse_prometheus_text(after_text)) {
      const size_t brace = name.find('{');
      const std::string base = name.substr(0, brace);
      if (base.size() < 6 || base.compare(base.size() - 6, 6, "_total") != 0) continue;
      const auto it = before.find(name);
      out[name] = value - (it == before.end() ? 0.0 : it->second);
    }
  } catch (const Error& e) {
    out["error"] = e.what();  // a malformed scrape is recorded, not hidden
  }
  return out;
}

std::string default_target(const RunRequest& r) {
  if (!r.baseline)
    return r.gate + " measurement of " +
           (gate_level(r.gate) < 2 ? "this build" : "the candidate server") +
           "; no claim of a change";
  if (r.option) return r.option->first + " = " + r.option->second + " passes " + r.gate;
  return "the candidate passes " + r.gate + " against the baseline";
}

}  // namespace

int run_qualification(const RunRequest& req, std::ostream& out, std::ostream& err) {
  const int top = gate_level(req.gate);
  const ChangeClassPolicy policy = ChangeClassPolicy::load(req.gates.string());
  const ChangeClass& cls = policy.at(req.change_class);
  std::vector<GateDefinition> defs;
  for (int g = 0; g <= 5; ++g)
    defs.push_back(load_gate(req.gates.string(), "G" + std::to_string(g)));
  receipts::BundleWriter bundle(req.out);
  const std::string id = req.out.filename().string();
  const auto epoch = harness::Clock::now();
  const bool gpu = harness::gpu_present();
  std::vector<GateResult> results;
  std::vector<std::string> limitations;

  // G0 and G1 need no server.
  results.push_back(
      evaluate_static_gate(defs[0], {req.receipts, req.profiles, req.gates, req.ctest_dir}));
  err << "G0: " << results.back().status << " (" << results.back().summary << ")\n";
  if (top >= 1) {
    results.push_back(
        evaluate_operator_gate(defs[1], req.operators_json, req.operator_runner, gpu, bundle, err));
    err << "G1: " << results.back().status << " (" << results.back().summary << ")\n";
    if (results.back().status != "not-run") {
      const auto speed = operator_table_limitations(
          json::parse(receipts::read_file(bundle.where_is("operators.json"))));
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
  std::vector<std::string> workload_ids;
  for (const GateDefinition* d : serving)
    for (const std::string& w : d->workloads)
      if (std::find(workload_ids.begin(), workload_ids.end(), w) == workload_ids.end())
        workload_ids.push_back(w);
  for (const std::string& w : req.extra_workloads)
    if (std::find(workload_ids.begin(), workload_ids.end(), w) == workload_ids.end())
      workload_ids.push_back(w);

  json change = {
      {"class", cls.name},
      {"option", req.option ? json{{"name", req.option->first}, {"value", req.option->second}}
                            : json(nullptr)},
      {"baseline", nullptr},
      {"candidate", nullptr}};
  std::vector<MetricSeries> metrics;
  ServingRun run;
  json client = nullptr;
  json counters = json::object();
  if (!workload_ids.empty()) {
    std::vector<Arm> arms;
    arms.push_back(start_arm("candidate", req.candidate, bundle, err));
    if (req.baseline) arms.push_back(start_arm("baseline", *req.baseline, bundle, err));
    check_arms_comparable(arms);
    change["candidate"] = arms[0].identity.identity;
    if (arms.size() > 1) change["baseline"] = arms[1].identity.identity;
    if (req.option) {
      // Typed as the server printed it, so that promotion compares like with like.
      const json& cfg = arms[0].identity.effective_config;
      if (cfg.contains(req.option->first)) change["option"]["value"] = cfg[req.option->first];
    }

    const std::string base = arms[0].server->base_url();
    workloads::PlanOptions plan_options;
    plan_options.model = harness::model_id(base);
    plan_options.count = [&](const json& body) {
      return int32_t(harness::tokenize(base, workloads::tokenize_body(body)).size());
    };
    std::vector<harness::CaseLoad> loads;
    for (const std::string& w : workload_ids) {
      const fs::path path = req.workloads / (w + ".json");
      workloads::WorkloadSpec spec =
          workloads::scaled(workloads::load_workload(path.string()), req.scale);
      if (req.repetitions > 0)
        for (workloads::CaseSpec& c : spec.cases) c.repetitions = req.repetitions;
      bundle.add_bytes("workloads/" + w + ".json", receipts::read_file(path), "workload");
      err << "planning " << w << " at scale " << req.scale
          << " (calibrating prompts with /tokenize)\n";
      run.plans[w] = workloads::plan_workload(spec, plan_options);
      run.specs[w] = spec;
      for (harness::CaseLoad& l : case_loads(run.plans[w])) loads.push_back(std::move(l));
    }

    std::vector<harness::ArmEndpoint> endpoints;
    for (const Arm& a : arms) endpoints.push_back({a.label, a.server->base_url()});
    reports::ProgressLine line = reports::ProgressLine::for_stderr();
    reports::Progress progress;
    const harness::RunProgress hooks = progress_hooks(loads, arms.size(), epoch, line, progress);
    run.records = harness::run_interleaved(loads, endpoints, epoch, hooks);
    line.finish();

    for (Arm& a : arms) {
      const std::string after = harness::http_get(a.server->base_url() + "/metrics").body;
      bundle.add_bytes("server/" + a.label + "/metrics-after.txt", after, "metrics");
      counters[a.label] = counter_deltas(a.metrics_before, after);
      const harness::ServerExit exit = a.server->stop();
      if (!exit.clean())
        limitations.push_back("the " + a.label +
                              " server did not stop cleanly: " + exit.describe());
    }
    std::string jsonl;
    for (const harness::RequestRecord& r : run.records) jsonl += harness::to_json(r).dump() + "\n";
    bundle.add_bytes("requests.jsonl", jsonl, "requests");

    client = client_cost(run.records);
    run.baseline = req.baseline ? "baseline" : "";
    run.dummy_weights = dummy_weights(arms[0]);
    metrics = case_metrics(run.records, "candidate", run.baseline);
    for (const GateDefinition* d : serving)
      results.push_back(evaluate_serving_gate(*d, run, metrics, cls, g1_passed));
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

  json gates = json::array();
  bool failed = false;
  for (const GateResult& r : results) {
    gates.push_back(r.to_json());
    failed = failed || r.status == "fail";
  }
  json metric_json = json::array();
  for (const MetricSeries& m : metrics) metric_json.push_back(metric_to_json(m, 5.0));
  json workloads_json = json::array();
  for (const std::string& w : workload_ids)
    workloads_json.push_back(
        {{"id", w}, {"spec_sha256", run.specs[w].sha256}, {"scale", req.scale}});
  json record = {{"schema", "sparkglm.qualification/1"},
                 {"id", id},
                 {"title", req.title.empty() ? req.gate + " qualification" : req.title},
                 {"created_at", utc_now()},
                 {"state", req.state},
                 {"level", req.gate},
                 {"target", req.target.empty() ? default_target(req) : req.target},
                 {"change", change},
                 {"environment", harness::probe_environment()},
                 {"workloads", workloads_json},
                 {"gates", gates},
                 {"metrics", metric_json},
                 {"limitations", limitations},
                 {"client", client},
                 {"counters", counters}};
  bundle.finish(record);
  const receipts::Problems problems = receipts::verify_bundle(req.out);
  for (const receipts::Problem& p : problems) err << "verify: " << p.to_string() << '\n';
  if (!problems.empty()) return 2;
  err << "bundle " << req.out.string() << " verifies\n";
  out << reports::render_all(req.out).card;
  return failed ? 1 : 0;
}

}  // namespace sparkglm::gates
