#include "reports/request_samples.h"

#include <algorithm>

#include "harness/request_metrics.h"

namespace sparkglm::reports {

namespace {

int arm_rank(const std::string& arm) {
  if (arm == "baseline") return 0;
  if (arm == "candidate" || arm.empty()) return 1;
  return 2;
}

ArmSamples& arm_of(CaseSamples& c, const std::string& arm) {
  for (ArmSamples& a : c.arms)
    if (a.arm == arm) return a;
  c.arms.push_back(ArmSamples{arm, {}, {}, 0, 0});
  return c.arms.back();
}

}  // namespace

std::string CaseSamples::cell() const {
  if (workload.empty()) return case_id;
  return workload + " / " + case_id;
}

std::vector<CaseSamples> case_samples(const std::vector<harness::RequestRecord>& records) {
  std::vector<CaseSamples> cases;
  for (const harness::RequestRecord& r : records) {
    if (r.repetition < 0) continue;  // warmup
    auto it = std::find_if(cases.begin(), cases.end(), [&](const CaseSamples& c) {
      return c.workload == r.workload && c.case_id == r.case_id;
    });
    if (it == cases.end()) {
      cases.push_back(CaseSamples{r.workload, r.case_id, {}});
      it = cases.end() - 1;
    }
    ArmSamples& arm = arm_of(*it, r.arm);
    if (!r.ok) {
      ++arm.failed;
      continue;
    }
    ++arm.ok;
    const harness::RequestMetrics m = harness::request_metrics(r);
    if (m.ttft_s) arm.ttft_ms.push_back(*m.ttft_s * 1000.0);
    if (m.decode_tok_s) arm.decode_tok_s.push_back(*m.decode_tok_s);
  }
  for (CaseSamples& c : cases)
    std::stable_sort(c.arms.begin(), c.arms.end(), [](const ArmSamples& a, const ArmSamples& b) {
      return arm_rank(a.arm) < arm_rank(b.arm);
    });
  return cases;
}

}  // namespace sparkglm::reports
