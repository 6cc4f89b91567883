// Planning and running a qualification run's workloads (qualification_workloads.h).
#include "gates/qualification_workloads.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "harness/server_api.h"
#include "receipts/bundle_file.h"
#include "reports/progress_line.h"
#include "workloads/prompt_builder.h"
#include "workloads/request_plan.h"
#include "workloads/workload_spec.h"

namespace sparkglm::gates {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

}  // namespace

workloads::TokenCounter server_token_counter(const std::string& base_url) {
  return [base_url](const json& body) {
    return int32_t(harness::tokenize(base_url, workloads::tokenize_body(body)).size());
  };
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

std::vector<harness::CaseLoad> plan_workloads(const RunRequest& req,
                                              const std::vector<std::string>& workload_ids,
                                              ServingArm& candidate, receipts::BundleWriter& bundle,
                                              std::ostream& err, ServingRun& run) {
  const std::string base = candidate.base_url;
  workloads::PlanOptions plan_options;
  plan_options.model = req.external
                           ? candidate.identity.identity["model"]["preset"].get<std::string>()
                           : harness::model_id(base);
  plan_options.count = server_token_counter(base);
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
  return loads;
}

std::vector<harness::RequestRecord> run_workloads(const std::vector<harness::CaseLoad>& loads,
                                                  const std::vector<ServingArm>& arms,
                                                  harness::Clock::time_point epoch) {
  std::vector<harness::ArmEndpoint> endpoints;
  for (const ServingArm& a : arms) endpoints.push_back({a.label, a.base_url});
  reports::ProgressLine line = reports::ProgressLine::for_stderr();
  reports::Progress progress;
  const harness::RunProgress hooks = progress_hooks(loads, arms.size(), epoch, line, progress);
  std::vector<harness::RequestRecord> records =
      harness::run_interleaved(loads, endpoints, epoch, hooks);
  line.finish();
  return records;
}

}  // namespace sparkglm::gates
