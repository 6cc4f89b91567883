#include "gates/case_metrics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "harness/request_metrics.h"
#include "harness/statistics.h"

namespace sparkglm::gates {
namespace {

using harness::RequestRecord;
using Group = std::vector<RequestRecord>;

struct MetricDef {
  const char* name;
  const char* unit;
  bool higher_is_better;
  std::function<std::optional<double>(const Group&)> sample;
};

std::optional<double> median_of(
    const Group& g,
    const std::function<std::optional<double>(const harness::RequestMetrics&)>& field) {
  std::vector<double> xs;
  for (const RequestRecord& r : g) {
    const auto v = field(harness::request_metrics(r));
    if (v) xs.push_back(*v);
  }
  if (xs.empty()) return std::nullopt;
  return harness::median(xs);
}

std::optional<double> wall(const Group& g) {
  double first = g.front().start_s, last = g.front().end_s;
  for (const RequestRecord& r : g) {
    first = std::min(first, r.start_s);
    last = std::max(last, r.end_s);
  }
  return last - first;
}

std::optional<double> largest_gap(const Group& g) {
  std::optional<double> out;
  for (const RequestRecord& r : g) {
    const auto m = harness::request_metrics(r);
    if (m.sse_gap_max_s) out = std::max(out.value_or(0.0), *m.sse_gap_max_s);
  }
  return out;
}

const std::vector<MetricDef>& metric_defs() {
  static const std::vector<MetricDef> defs = {
      {"output_throughput_tok_s", "tok/s", true, harness::output_throughput_tok_s},
      {"wall_s", "s", false, wall},
      {"ttft_s", "s", false,
       [](const Group& g) { return median_of(g, [](auto& m) { return m.ttft_s; }); }},
      {"ttfv_s", "s", false,
       [](const Group& g) { return median_of(g, [](auto& m) { return m.ttfv_s; }); }},
      {"decode_tok_s", "tok/s", true,
       [](const Group& g) { return median_of(g, [](auto& m) { return m.decode_tok_s; }); }},
      {"tpot_s", "s", false,
       [](const Group& g) { return median_of(g, [](auto& m) { return m.tpot_s; }); }},
      {"prefill_tok_s", "tok/s", true,
       [](const Group& g) { return median_of(g, [](auto& m) { return m.prefill_tok_s; }); }},
      {"sse_gap_p95_s", "s", false,
       [](const Group& g) { return median_of(g, [](auto& m) { return m.sse_gap_p95_s; }); }},
      {"sse_gap_max_s", "s", false, largest_gap},
  };
  return defs;
}

}  // namespace

std::vector<MetricSeries> case_metrics(const std::vector<RequestRecord>& records,
                                       const std::string& candidate_arm,
                                       const std::string& baseline_arm) {
  // (workload, case) in first-seen order; groups per (arm, repetition).
  std::vector<std::pair<std::string, std::string>> cases;
  std::map<std::tuple<std::string, std::string, std::string, int32_t>, Group> groups;
  for (const RequestRecord& r : records) {
    if (r.repetition < 0) continue;  // warmups are kept in the bundle, never measured
    const auto key = std::make_pair(r.workload, r.case_id);
    if (std::find(cases.begin(), cases.end(), key) == cases.end()) cases.push_back(key);
    groups[{r.workload, r.case_id, r.arm, r.repetition}].push_back(r);
  }
  std::vector<MetricSeries> out;
  for (const auto& [workload, case_id] : cases) {
    for (const MetricDef& def : metric_defs()) {
      MetricSeries m{def.name, def.unit, workload, case_id, def.higher_is_better, {}, {}};
      for (const auto& [key, group] : groups) {
        if (std::get<0>(key) != workload || std::get<1>(key) != case_id) continue;
        const std::string& arm = std::get<2>(key);
        if (arm != candidate_arm && (baseline_arm.empty() || arm != baseline_arm)) continue;
        const auto v = def.sample(group);
        if (!v) continue;
        (arm == candidate_arm ? m.candidate : m.baseline).push_back(*v);
      }
      if (!m.candidate.empty()) out.push_back(std::move(m));
    }
  }
  return out;
}

nlohmann::json metric_to_json(const MetricSeries& m, double min_effect_pct) {
  auto side = [](const std::vector<double>& xs) -> nlohmann::json {
    if (xs.empty()) return nullptr;
    const harness::Summary s = harness::summarize(xs);
    return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"samples", xs}};
  };
  nlohmann::json j = {{"name", m.name},
                      {"unit", m.unit},
                      {"workload", m.workload},
                      {"case", m.case_id},
                      {"direction", m.higher_is_better ? "higher" : "lower"},
                      {"n", m.candidate.size()},
                      {"baseline", side(m.baseline)},
                      {"candidate", side(m.candidate)},
                      {"change_pct", nullptr},
                      {"ci95", nullptr},
                      {"p", nullptr},
                      {"verdict", "measured"}};
  if (!m.baseline.empty()) {
    const harness::Comparison c =
        harness::compare_samples(m.baseline, m.candidate,
                                 m.higher_is_better ? harness::Direction::kHigherIsBetter
                                                    : harness::Direction::kLowerIsBetter,
                                 min_effect_pct);
    // A ratio to a zero baseline has no finite value; the record says null rather than lie.
    if (std::isfinite(c.change_pct)) j["change_pct"] = c.change_pct;
    if (std::isfinite(c.ci95.lo) && std::isfinite(c.ci95.hi)) j["ci95"] = {c.ci95.lo, c.ci95.hi};
    if (std::isfinite(c.p)) j["p"] = c.p;
    j["verdict"] = harness::to_string(c.verdict);
  }
  return j;
}

}  // namespace sparkglm::gates
