#pragma once
// The load of a qualification run: each workload the serving gates drive, scaled and planned
// against the candidate (prompts calibrated with its /tokenize), then every case run interleaved
// over the arms (harness/ab_runner.h) with a progress line on stderr.
#include <ostream>
#include <string>
#include <vector>

#include "gates/qualification_run.h"
#include "gates/serving_arm.h"
#include "gates/serving_gate.h"
#include "harness/ab_runner.h"
#include "harness/request_record.h"
#include "receipts/bundle_writer.h"
#include "workloads/request_plan.h"

namespace sparkglm::gates {

// Loads, scales and plans `workload_ids` (from request.workloads) against `candidate`: each spec
// goes into the bundle under workloads/, and into run.specs and run.plans. The cases to run, in
// workload order.
std::vector<harness::CaseLoad> plan_workloads(const RunRequest& request,
                                              const std::vector<std::string>& workload_ids,
                                              ServingArm& candidate, receipts::BundleWriter& bundle,
                                              std::ostream& err, ServingRun& run);

// Counts a request body's prompt tokens with the server's own /tokenize, as calibration needs.
workloads::TokenCounter server_token_counter(const std::string& base_url);

// A workload plan's cases as loads for harness::run_interleaved, labelled "workload/case".
std::vector<harness::CaseLoad> case_loads(const workloads::WorkloadPlan& plan);

// Runs `loads` interleaved over `arms`, times measured from `epoch`; every arm's records.
std::vector<harness::RequestRecord> run_workloads(const std::vector<harness::CaseLoad>& loads,
                                                  const std::vector<ServingArm>& arms,
                                                  harness::Clock::time_point epoch);

}  // namespace sparkglm::gates
