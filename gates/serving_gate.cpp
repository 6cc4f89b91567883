#include "gates/serving_gate.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "engine/core/error.h"
#include "harness/statistics.h"
#include "workloads/grader.h"

namespace sparkglm::gates {
namespace {

using harness::RequestRecord;

bool in_gate(const GateDefinition& gate, const std::string& workload) {
  return std::find(gate.workloads.begin(), gate.workloads.end(), workload) != gate.workloads.end();
}

std::vector<RequestRecord> arm_records(const ServingRun& run, const std::string& workload,
                                       const std::string& arm) {
  std::vector<RequestRecord> out;
  for (const RequestRecord& r : run.records)
    if (r.workload == workload && r.arm == arm) out.push_back(r);
  return out;
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

CriterionResult no_errors(const Criterion& c, const GateDefinition& gate, const ServingRun& run) {
  int64_t failed = 0;
  std::string first;
  for (const RequestRecord& r : run.records) {
    if (!in_gate(gate, r.workload) || r.ok) continue;
    if (++failed == 1)
      first = r.arm + " " + r.workload + "/" + r.case_id + " rep " + std::to_string(r.repetition) +
              " #" + std::to_string(r.index) + ": " + r.error;
  }
  return {c.name, failed, 0, failed == 0, first};
}

// Every case of the gate's workloads that declares the grader is graded with its parameters; when
// no case of any of them declares it, every case is graded with none.
void grader_criteria(const Criterion& c, const GateDefinition& gate, const ServingRun& run,
                     GateResult& result, std::vector<std::string>& informational) {
  bool declared = false;
  for (const std::string& w : gate.workloads)
    for (const auto& cs : run.specs.at(w).cases)
      for (const auto& g : cs.graders) declared = declared || g.name == c.grader;
  for (const std::string& w : gate.workloads) {
    const workloads::WorkloadSpec& spec = run.specs.at(w);
    const workloads::WorkloadPlan& plan = run.plans.at(w);
    const std::vector<RequestRecord> records = arm_records(run, w, run.candidate);
    for (const workloads::CaseSpec& cs : spec.cases) {
      workloads::GraderSpec grader{c.grader, nlohmann::json::object()};
      bool use = !declared;
      for (const auto& g : cs.graders)
        if (g.name == c.grader) grader = g, use = true;
      if (!use) continue;
      const workloads::GradeResult g =
          workloads::grade(grader, cs, *plan.find_case(cs.id), records);
      const std::string name = c.name + " (" + w + "/" + cs.id + ")";
      if (run.dummy_weights && workloads::needs_real_model(grader)) {
        informational.push_back(name + ": " + (g.pass ? "pass" : "fail") +
                                (g.detail.empty() ? "" : " (" + g.detail + ")"));
        continue;
      }
      result.criteria.push_back({name, g.observed, g.expected, g.pass, g.detail});
    }
  }
}

CriterionResult token_ids_match(const Criterion& c, const GateDefinition& gate,
                                const ServingRun& run, const ChangeClass& cls, bool g1_passed) {
  std::map<std::tuple<std::string, std::string, int32_t, int32_t>, std::string> base;
  for (const RequestRecord& r : run.records)
    if (r.arm == run.baseline && in_gate(gate, r.workload) && r.repetition >= 0)
      base[{r.workload, r.case_id, r.repetition, r.index}] = r.token_ids_sha256;
  int64_t compared = 0, differ = 0;
  std::string first;
  for (const RequestRecord& r : run.records) {
    if (r.arm != run.candidate || !in_gate(gate, r.workload) || r.repetition < 0) continue;
    const auto it = base.find({r.workload, r.case_id, r.repetition, r.index});
    if (it == base.end()) continue;
    ++compared;
    if (it->second != r.token_ids_sha256 && ++differ == 1)
      first = "first difference: " + r.workload + "/" + r.case_id + " rep " +
              std::to_string(r.repetition) + " #" + std::to_string(r.index);
  }
  const bool waived = cls.numerics_may_move && g1_passed;
  std::string note = first;
  if (waived)
    note = "waived: change class " + cls.name + " lets numerics move and G1 passed" +
           (first.empty() ? "" : "; " + first);
  if (compared == 0) return {c.name, "nothing compared", "every output identical", false, note};
  return {c.name, std::to_string(differ) + " of " + std::to_string(compared) + " differ",
          "0 differ", differ == 0 || waived, note};
}

void metric_criteria(const Criterion& c, const GateDefinition& gate,
                     const std::vector<MetricSeries>& metrics, GateResult& result) {
  for (const MetricSeries& m : metrics) {
    if (m.name != c.metric || !in_gate(gate, m.workload) || m.baseline.empty()) continue;
    const double b = harness::median(m.baseline), k = harness::median(m.candidate);
    const std::string name = c.name + " (" + m.workload + "/" + m.case_id + ")";
    if (c.check == "ratio_at_least") {
      result.criteria.push_back({name, k, fmt(c.factor) + " x baseline " + fmt(b),
                                 k >= c.factor * b,
                                 "candidate/baseline = " + fmt(b > 0 ? k / b : 0)});
    } else if (c.check == "ratio_at_most_plus") {
      const double limit = c.factor * b + c.plus;
      result.criteria.push_back(
          {name, k,
           fmt(c.factor) + " x baseline " + fmt(b) + " + " + fmt(c.plus) + " = " + fmt(limit),
           k <= limit, ""});
    } else {  // verdict_not_worse
      const harness::Comparison cmp =
          harness::compare_samples(m.baseline, m.candidate,
                                   m.higher_is_better ? harness::Direction::kHigherIsBetter
                                                      : harness::Direction::kLowerIsBetter,
                                   5.0);
      result.criteria.push_back({name, harness::to_string(cmp.verdict), "not worse",
                                 cmp.verdict != harness::Verdict::kWorse,
                                 "change " + fmt(cmp.change_pct) + " %, p " + fmt(cmp.p)});
    }
  }
}

}  // namespace

GateResult evaluate_serving_gate(const GateDefinition& gate, const ServingRun& run,
                                 const std::vector<MetricSeries>& metrics,
                                 const ChangeClass& change_class, bool g1_passed) {
  GateResult result;
  result.id = gate.id;
  std::vector<std::string> informational, not_applicable;
  for (const Criterion& c : gate.criteria) {
    if (c.check == "no_errors") {
      result.criteria.push_back(no_errors(c, gate, run));
    } else if (c.check == "grader") {
      grader_criteria(c, gate, run, result, informational);
    } else if (run.baseline.empty() &&
               (c.check == "token_ids_match_baseline" || c.check == "ratio_at_least" ||
                c.check == "ratio_at_most_plus" || c.check == "verdict_not_worse")) {
      not_applicable.push_back(c.name);
    } else if (c.check == "token_ids_match_baseline") {
      result.criteria.push_back(token_ids_match(c, gate, run, change_class, g1_passed));
    } else if (c.check == "ratio_at_least" || c.check == "ratio_at_most_plus" ||
               c.check == "verdict_not_worse") {
      metric_criteria(c, gate, metrics, result);
    } else {
      throw Error(ErrorKind::kInvalidConfig,
                  gate.id + " has no serving check \"" + c.check + "\" (criterion " + c.name + ")");
    }
  }
  std::string notes;
  if (!not_applicable.empty()) {
    notes = "single-arm measurement, A/B criteria not applicable:";
    for (const std::string& n : not_applicable) notes += " [" + n + "]";
  }
  if (!informational.empty()) {
    notes += std::string(notes.empty() ? "" : "; ") +
             "informational on dummy weights (outputs carry no meaning):";
    for (const std::string& n : informational) notes += " [" + n + "]";
  }
  result.summary = notes;
  result.conclude();
  return result;
}

}  // namespace sparkglm::gates
