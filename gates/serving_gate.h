#pragma once
// Evaluates a serving gate (G2, G3, G4) from what a run observed: the records of every arm, the
// workloads as planned, and the per-case metrics. Criteria come from the gate's JSON; this file
// only knows how to judge each kind of check.
#include <map>
#include <string>
#include <vector>

#include "gates/case_metrics.h"
#include "gates/change_class_policy.h"
#include "gates/gate_definition.h"
#include "harness/request_record.h"
#include "workloads/request_plan.h"
#include "workloads/workload_spec.h"

namespace sparkglm::gates {

struct ServingRun {
  std::vector<harness::RequestRecord> records;           // every arm, warmups included
  std::map<std::string, workloads::WorkloadSpec> specs;  // by workload id (scaled)
  std::map<std::string, workloads::WorkloadPlan> plans;
  std::string candidate = "candidate";
  std::string baseline;        // "" for a single-arm measurement
  bool dummy_weights = false;  // quality graders are informational on dummy weights
};

GateResult evaluate_serving_gate(const GateDefinition& gate, const ServingRun& run,
                                 const std::vector<MetricSeries>& metrics,
                                 const ChangeClass& change_class, bool g1_passed);

}  // namespace sparkglm::gates
