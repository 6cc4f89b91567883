#include "gates/quality_probes.h"

#include <utility>

#include "engine/core/error.h"
#include "gates/qualification_workloads.h"
#include "harness/ab_runner.h"
#include "harness/server_api.h"
#include "harness/server_identity.h"
#include "harness/server_process.h"
#include "workloads/request_plan.h"

namespace sparkglm::gates {

using nlohmann::json;
using workloads::GradeResult;

namespace {

const GradeResult* find_grade(const std::vector<GradeResult>& grades, const std::string& case_id,
                              const std::string& grader) {
  for (const GradeResult& g : grades)
    if (g.case_id == case_id && g.name == grader) return &g;
  return nullptr;
}

const double* target_of(const ProbeTargets& t, const std::string& case_id,
                        const std::string& grader) {
  const auto c = t.min_pass_rate.find(case_id);
  if (c == t.min_pass_rate.end()) return nullptr;
  const auto g = c->second.find(grader);
  return g == c->second.end() ? nullptr : &g->second;
}

}  // namespace

ProbeRun run_probes(const ProbeTargets& t, const std::filesystem::path& workloads_dir,
                    const std::string& server_bin, const std::vector<std::string>& server_args,
                    const std::filesystem::path& log, std::ostream& err) {
  ProbeRun run;
  run.spec = workloads::load_workload((workloads_dir / (t.workload + ".json")).string());
  harness::ServerProcessOptions o;
  o.binary = server_bin;
  o.args = server_args;
  o.log_path = log.string();
  err << "probes: starting " << server_bin;
  for (const std::string& a : server_args) err << ' ' << a;
  err << "\n";
  harness::ServerProcess server(o);
  // The binary by its file name and checksum, not by this machine's path to it.
  run.server_argv = server.argv();
  run.server_argv[0] = std::filesystem::path(server_bin).filename().string();
  run.server_sha256 = harness::file_sha256(server_bin);
  const std::string base = server.base_url();
  workloads::PlanOptions plan;
  plan.model = harness::model_id(base);
  plan.count = server_token_counter(base);
  const std::vector<harness::CaseLoad> loads = case_loads(workloads::plan_workload(run.spec, plan));
  err << "probes: " << t.workload << ", " << loads.size() << " cases\n";
  run.records = harness::run_interleaved(loads, {{"candidate", base}}, harness::Clock::now());
  const harness::ServerExit exit = server.stop();
  if (!exit.clean())
    throw Error(ErrorKind::kIo, "probes: the server did not stop cleanly (" + exit.describe() +
                                    "); its log: " + log.string());
  run.grades = grade_probes(run.spec, run.records);
  return run;
}

std::vector<GradeResult> grade_probes(const workloads::WorkloadSpec& spec,
                                      const std::vector<harness::RequestRecord>& records) {
  return workloads::grade_workload(spec, workloads::plan_workload(spec, {}), records);
}

std::vector<CriterionResult> probe_criteria(const ProbeTargets& t,
                                            const std::vector<GradeResult>& grades) {
  std::vector<CriterionResult> out;
  for (const auto& [case_id, graders] : t.min_pass_rate)
    for (const auto& [grader, least] : graders) {
      const std::string name = "probe " + case_id + ": " + grader + " pass rate";
      const GradeResult* g = find_grade(grades, case_id, grader);
      if (!g) {
        out.push_back({name, nullptr, least, false,
                       "not graded: the probes workload " + t.workload +
                           " has no such case and "
                           "grader, or the probes did not run"});
        continue;
      }
      out.push_back({name, g->pass_rate(), least, g->requests > 0 && g->pass_rate() >= least,
                     std::to_string(g->requests - g->failed_requests) + " of " +
                         std::to_string(g->requests) + " requests passed" +
                         (g->pass ? "" : "; " + g->detail)});
    }
  return out;
}

json probe_grades_json(const ProbeTargets& t, const std::vector<GradeResult>& grades) {
  json out = json::array();
  for (const GradeResult& g : grades) {
    const double* least = target_of(t, g.case_id, g.name);
    out.push_back({{"case", g.case_id},
                   {"grader", g.name},
                   {"requests", g.requests},
                   {"failed", g.failed_requests},
                   {"pass_rate", g.pass_rate()},
                   {"min_pass_rate", least ? json(*least) : json(nullptr)}});
  }
  return out;
}

}  // namespace sparkglm::gates
