#include "gates/qualification_run.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/core/build_info.h"
#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/core/utc_time.h"
#include "gates/case_metrics.h"
#include "gates/change_class_policy.h"
#include "gates/device_share.h"
#include "gates/gate_definition.h"
#include "gates/operator_gate.h"
#include "gates/serving_arm.h"
#include "gates/serving_gate.h"
#include "gates/static_gate.h"
#include "harness/ab_runner.h"
#include "harness/histogram_delta.h"
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

bool dummy_weights(const ServingArm& arm) {
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
  // The callback's clock sees parsing and recording only; the load thread also spends CPU in
  // libcurl and the socket for every event, so its whole thread CPU time is recorded beside it.
  const std::vector<double> cpu = harness::thread_cpu_per_event_s(records);
  const harness::DeliverySummary d = harness::delivery_summary(records);
  return {
      {"overhead_per_event_median_s", overhead.empty() ? 0.0 : harness::median(overhead)},
      {"overhead_per_event_max_s", overhead_max},
      {"worst_median_overhead_over_median_itl", share ? json(*share) : json(nullptr)},
      {"thread_cpu_per_event_median_s", cpu.empty() ? json(nullptr) : json(harness::median(cpu))},
      {"thread_cpu_per_event_max_s",
       cpu.empty() ? json(nullptr) : json(*std::max_element(cpu.begin(), cpu.end()))},
      {"delivery",
       {{"reads_with_output", d.reads},
        {"output_events", d.events},
        {"max_events_per_read", d.max_events_per_read},
        {"p99_events_per_read", d.p99_events_per_read},
        {"bursty", d.bursty()}}}};
}

// A bursty server cannot qualify quietly: the warning every card shows, naming the numbers.
std::optional<std::string> bursty_delivery_warning(
    const std::vector<harness::RequestRecord>& records) {
  const harness::DeliverySummary d = harness::delivery_summary(records);
  if (!d.bursty()) return std::nullopt;
  return "bursty delivery: " + std::to_string(d.events) + " output events reached the client in " +
         std::to_string(d.reads) + " socket reads (p99 " + std::to_string(d.p99_events_per_read) +
         ", max " + std::to_string(d.max_events_per_read) +
         " events in one read); the client's event times (ITL, decode rate, SSE gaps) then "
         "measure the batching, not the server's pace";
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

// The server's delay from sampling a token to writing its event (sparkglm_sse_emit_delay_seconds),
// as a delta over the run: the server-side half of "tokens leave when they are made", beside the
// client's events-per-read. Null when the server has no such histogram (another server, --url).
json emit_delay(const std::string& before_text, const std::string& after_text) {
  try {
    const auto h = harness::histogram_delta(harness::parse_prometheus_text(before_text),
                                            harness::parse_prometheus_text(after_text),
                                            "sparkglm_sse_emit_delay_seconds");
    if (!h) return nullptr;
    auto bound = [&](double q) {
      const double b = h->quantile_bound(q);
      return std::isfinite(b) ? json(b) : json("+Inf");
    };
    json buckets = json::array();
    for (const auto& [le, n] : h->buckets)
      buckets.push_back({std::isfinite(le) ? json(le) : json("+Inf"), n});
    return {{"count", h->count},
            {"mean_s", h->count > 0 ? json(h->sum / h->count) : json(nullptr)},
            {"p50_le_s", bound(0.50)},
            {"p90_le_s", bound(0.90)},
            {"p99_le_s", bound(0.99)},
            {"buckets", std::move(buckets)}};
  } catch (const Error& e) {
    return {{"error", e.what()}};  // a malformed scrape is recorded, not hidden
  }
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
  json emit_delays = json::object();
  json device_share = nullptr;
  if (!workload_ids.empty()) {
    std::vector<ServingArm> arms;
    if (req.external) {
      arms.push_back(attach_arm("candidate", *req.external, bundle, err));
      limitations.push_back(
          "measured through --url: the server was running already; its binary, commit, profile "
          "and effective configuration were not observed (server/candidate/endpoint.json holds "
          "what it said over HTTP), so no promotion may cite this bundle");
    } else {
      ArmCommand candidate = req.candidate;
      std::optional<ArmCommand> baseline = req.baseline;
      std::vector<ArmCommand*> commands = {&candidate};
      if (baseline) commands.push_back(&*baseline);
      int64_t device_bytes = 0;
      const json env = harness::probe_environment();
      if (env.contains("gpus") && env["gpus"].is_array() && !env["gpus"].empty())
        device_bytes = env["gpus"][0].value("memory_bytes", int64_t(0));
      device_share = plan_device_share(commands, serves_on_cuda(candidate), device_bytes).to_json();
      arms.push_back(start_arm("candidate", candidate, bundle, err));
      if (baseline) arms.push_back(start_arm("baseline", *baseline, bundle, err));
    }
    check_arms_comparable(arms);
    change["candidate"] = arms[0].identity.identity;
    if (arms.size() > 1) change["baseline"] = arms[1].identity.identity;
    if (req.option) {
      // Typed as the server printed it, so that promotion compares like with like.
      const json& cfg = arms[0].identity.effective_config;
      if (cfg.contains(req.option->first)) change["option"]["value"] = cfg[req.option->first];
    }

    const std::string base = arms[0].base_url;
    workloads::PlanOptions plan_options;
    plan_options.model = req.external
                             ? arms[0].identity.identity["model"]["preset"].get<std::string>()
                             : harness::model_id(base);
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
    for (const ServingArm& a : arms) endpoints.push_back({a.label, a.base_url});
    reports::ProgressLine line = reports::ProgressLine::for_stderr();
    reports::Progress progress;
    const harness::RunProgress hooks = progress_hooks(loads, arms.size(), epoch, line, progress);
    run.records = harness::run_interleaved(loads, endpoints, epoch, hooks);
    line.finish();

    for (ServingArm& a : arms) {
      const std::string after = a.scrape_metrics();
      bundle.add_bytes("server/" + a.label + "/metrics-after.txt", after, "metrics");
      counters[a.label] = counter_deltas(a.metrics_before, after);
      emit_delays[a.label] = emit_delay(a.metrics_before, after);
      if (!a.server) continue;  // measured through --url: never ours to stop
      const harness::ServerExit exit = a.server->stop();
      if (!exit.clean())
        limitations.push_back("the " + a.label +
                              " server did not stop cleanly: " + exit.describe());
    }
    std::string jsonl;
    for (const harness::RequestRecord& r : run.records) jsonl += harness::to_json(r).dump() + "\n";
    bundle.add_bytes("requests.jsonl", jsonl, "requests");

    client = client_cost(run.records);
    if (const auto warning = bursty_delivery_warning(run.records)) {
      limitations.push_back(*warning);
      err << "warning: " << *warning << '\n';
    }
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
                 {"created_at", utc_now_iso8601()},
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
                 {"counters", counters},
                 {"sse_emit_delay", emit_delays},
                 {"device_share", device_share}};
  bundle.finish(record);
  const receipts::Problems problems = receipts::verify_bundle(req.out);
  for (const receipts::Problem& p : problems) err << "verify: " << p.to_string() << '\n';
  if (!problems.empty()) return 2;
  err << "bundle " << req.out.string() << " verifies\n";
  out << reports::render_all(req.out).card;
  return failed ? 1 : 0;
}

}  // namespace sparkglm::gates
