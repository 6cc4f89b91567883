#pragma once
// The quality probes of the trained tinyGLM: G2's quality_targets.probes (gates/quality_targets.h)
// judged on greedy replies through the server users run. `sparkglm-qualify quality` starts
// sparkglm-serve on the checkpoint (the device and KV dtype it scores the held-out loss with),
// sends it the probes workload (prompts calibrated with the server's /tokenize, each case at its
// arrival) and grades every request (workloads/grader.h). Each (case, grader) with a target is a
// criterion on its pass rate; the others are measured and recorded. A quality bundle carries the
// workload file and the records (requests.jsonl), so the verifier grades them again and judges
// the gate anew (gates/quality_bundle.h).
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/gate_definition.h"
#include "gates/quality_targets.h"
#include "harness/request_record.h"
#include "workloads/grader.h"
#include "workloads/workload_spec.h"

namespace sparkglm::gates {

struct ProbeRun {
  workloads::WorkloadSpec spec;  // as loaded: its file, with the file's sha256
  std::vector<harness::RequestRecord> records;
  std::vector<workloads::GradeResult> grades;
  std::vector<std::string> server_argv;  // the server as run, its binary by file name
  std::string server_sha256;             // of the binary
  std::string server_log;                // its stdout and stderr
};

// Starts `server_bin` with `server_args` (a port is picked; its log goes to `log`), runs the
// targets' workload from `workloads_dir` at scale 1 and grades it. Throws Error when the server
// does not start or the workload does not load or plan; a request that fails is a record that
// fails its graders.
ProbeRun run_probes(const ProbeTargets& t, const std::filesystem::path& workloads_dir,
                    const std::string& server_bin, const std::vector<std::string>& server_args,
                    const std::filesystem::path& log, std::ostream& err);

// Every grader of every case from the records alone: the plan is made again without a server
// (what the graders compare with, the expected answers and the number of requests, does not
// depend on how the prompts were calibrated).
std::vector<workloads::GradeResult> grade_probes(
    const workloads::WorkloadSpec& spec, const std::vector<harness::RequestRecord>& records);

// One criterion per target, "probe <case>: <grader> pass rate" at least its share. A target whose
// case and grader the grades lack fails ("not graded").
std::vector<CriterionResult> probe_criteria(const ProbeTargets& t,
                                            const std::vector<workloads::GradeResult>& grades);

// Per grade: {"case", "grader", "requests", "failed", "pass_rate", "min_pass_rate" (null when
// recorded only)}, as a quality bundle's record holds them.
nlohmann::json probe_grades_json(const ProbeTargets& t,
                                 const std::vector<workloads::GradeResult>& grades);

}  // namespace sparkglm::gates
