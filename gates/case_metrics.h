#pragma once
// The per-case metrics of a run, from its records alone: for every (workload, case, arm) one sample
// per measured repetition of each metric below, summarised, and, with two arms, compared
// (harness/statistics.h). These are qualification.json's `metrics`.
//
//   output_throughput_tok_s  Σ completion tokens / (last end − first start) of the repetition:
//                            the output throughput a user gets (prefill, queueing, client gaps in)
//   wall_s                   last end − first start of the repetition
//   ttft_s                   median time to the first token (first event carrying a token)
//   ttfv_s                   median time to the first visible text (first event with content)
//   decode_tok_s             median per-request decode rate, (tokens − 1) / (last − first token)
//   tpot_s                   median per-request TPOT
//   prefill_tok_s            median prompt tokens / TTFT (includes queueing)
//   sse_gap_p95_s            median of the per-request SSE gap p95
//   sse_gap_max_s            largest SSE gap of the repetition
//
// Bundles written before output_throughput_tok_s carry `aggregate_decode_tok_s` instead (see
// harness/request_metrics.h); their recorded samples stay as they were written.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/request_record.h"

namespace sparkglm::gates {

struct MetricSeries {
  std::string name, unit, workload, case_id;
  bool higher_is_better = true;
  std::vector<double> baseline;  // one sample per measured repetition; empty for one arm
  std::vector<double> candidate;
};

// Every metric of every case that has at least one sample in the candidate arm, in record order.
// `baseline_arm` empty: a single-arm measurement.
std::vector<MetricSeries> case_metrics(const std::vector<harness::RequestRecord>& records,
                                       const std::string& candidate_arm,
                                       const std::string& baseline_arm);

// The qualification.json `metrics` entry; a gain or loss under `min_effect_pct` is neutral.
nlohmann::json metric_to_json(const MetricSeries& m, double min_effect_pct);

}  // namespace sparkglm::gates
