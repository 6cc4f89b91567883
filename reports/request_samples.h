#pragma once
// The per-request distributions the HTML charts draw, recomputed from the raw records with the
// definitions of QUALIFICATION.md ("Metrics", computed by harness/request_metrics.h): TTFT =
// first output - start; decode rate = (completion tokens - 1) / (last output event - first
// output event). Warmups (negative repetition) are left out; failed requests are counted, not
// drawn.
#include <string>
#include <vector>

#include "harness/request_record.h"

namespace sparkglm::reports {

struct ArmSamples {
  std::string arm;  // "baseline", "candidate", or "" for a single-arm run
  std::vector<double> ttft_ms;
  std::vector<double> decode_tok_s;  // requests with at least 2 tokens over a positive span
  int ok = 0, failed = 0;
};

struct CaseSamples {
  std::string workload, case_id;
  std::string cell() const;      // "workload / case", as the metrics tables name it
  std::vector<ArmSamples> arms;  // baseline first, then candidate, then any other arm
};

// Cases (workload and case id) in order of first appearance in the records.
std::vector<CaseSamples> case_samples(const std::vector<harness::RequestRecord>& records);

}  // namespace sparkglm::reports
