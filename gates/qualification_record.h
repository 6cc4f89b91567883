#pragma once
// The end of a qualification run: what it found, written as the bundle's qualification.json
// (schema sparkglm.qualification/1), the bundle finished and verified, and its card printed.
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/case_metrics.h"
#include "gates/gate_definition.h"
#include "gates/qualification_run.h"
#include "gates/serving_gate.h"
#include "receipts/bundle_writer.h"

namespace sparkglm::gates {

// Everything the record is made of, gathered as the run goes.
struct QualificationRecord {
  nlohmann::json change;                  // class, option, baseline and candidate identities
  std::vector<GateResult> results;        // G0..GN, in gate order
  std::vector<std::string> limitations;   // what a reader must know before citing the bundle
  std::vector<std::string> workload_ids;  // the workloads driven, in run order
  ServingRun run;                         // their specs, plans and every request's record
  std::vector<MetricSeries> metrics;      // per-case metrics of the run
  nlohmann::json client = nullptr;        // the client's cost (serving_evidence.h)
  nlohmann::json counters = nlohmann::json::object();     // per arm, deltas over the run
  nlohmann::json emit_delays = nlohmann::json::object();  // per arm, deltas over the run
  nlohmann::json device_share = nullptr;  // device_share.h's plan; null when none was made
};

// Writes the record, finishes and verifies the bundle at request.out and prints its card to
// `out`: 0 when every evaluated gate passed, 1 when one failed, 2 when the bundle does not verify
// (each problem printed to `err`).
int finish_qualification(const RunRequest& request, QualificationRecord& record,
                         receipts::BundleWriter& bundle, std::ostream& out, std::ostream& err);

}  // namespace sparkglm::gates
