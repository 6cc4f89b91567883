#include "reports/metric_row.h"

#include <cmath>
#include <cstdio>

namespace sparkglm::reports {

namespace {

std::optional<double> number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string string_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<ArmStats> arm(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return std::nullopt;
  ArmStats stats;
  stats.median = number(*it, "median").value_or(NAN);
  stats.min = number(*it, "min").value_or(NAN);
  stats.max = number(*it, "max").value_or(NAN);
  const auto samples = it->find("samples");
  if (samples != it->end() && samples->is_array())
    for (const nlohmann::json& s : *samples)
      if (s.is_number()) stats.samples.push_back(s.get<double>());
  return stats;
}

std::string printf_string(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::string MetricRow::cell() const {
  if (workload.empty()) return case_id;
  if (case_id.empty()) return workload;
  return workload + " / " + case_id;
}

std::optional<double> MetricRow::ratio() const {
  if (change_pct) return 1 + *change_pct / 100;
  if (baseline && candidate && baseline->median != 0) return candidate->median / baseline->median;
  return std::nullopt;
}

std::vector<MetricRow> metric_rows(const nlohmann::json& record) {
  std::vector<MetricRow> rows;
  const auto metrics = record.find("metrics");
  if (metrics == record.end() || !metrics->is_array()) return rows;
  for (const nlohmann::json& m : *metrics) {
    if (!m.is_object()) continue;
    MetricRow row;
    row.name = string_field(m, "name");
    row.unit = string_field(m, "unit");
    row.workload = string_field(m, "workload");
    row.case_id = string_field(m, "case");
    row.direction = string_field(m, "direction");
    row.n = static_cast<int>(number(m, "n").value_or(0));
    row.baseline = arm(m, "baseline");
    row.candidate = arm(m, "candidate");
    row.change_pct = number(m, "change_pct");
    const auto ci = m.find("ci95");
    if (ci != m.end() && ci->is_array() && ci->size() == 2 && (*ci)[0].is_number() &&
        (*ci)[1].is_number()) {
      row.ci_lo = (*ci)[0].get<double>();
      row.ci_hi = (*ci)[1].get<double>();
    }
    row.p = number(m, "p");
    row.verdict = string_field(m, "verdict");
    // Latencies read better in milliseconds (TTFT 38.4 ms, not 0.0384 s); ratios do not change.
    if (row.unit == "s") {
      row.unit = "ms";
      for (std::optional<ArmStats>* side : {&row.baseline, &row.candidate}) {
        if (!*side) continue;
        ArmStats& a = **side;
        a.median *= 1000, a.min *= 1000, a.max *= 1000;
        for (double& x : a.samples) x *= 1000;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const double a = std::fabs(v);
  if (a >= 1000) return printf_string("%.0f", v);
  if (a >= 100) return printf_string("%.1f", v);
  if (a >= 10) return printf_string("%.2f", v);
  return printf_string("%.4g", v);  // small values (seconds) keep four significant digits
}

std::string format_range(const ArmStats& arm) {
  return format_value(arm.median) + " [" + format_value(arm.min) + " .. " + format_value(arm.max) +
         "]";
}

std::string format_change_pct(std::optional<double> pct) {
  if (!pct || !std::isfinite(*pct)) return "-";
  return printf_string("%+.1f%%", *pct);
}

std::string format_ci(std::optional<double> lo, std::optional<double> hi) {
  if (!lo || !hi) return "-";
  char buf[80];
  std::snprintf(buf, sizeof buf, "[%.3f, %.3f]", *lo, *hi);
  return buf;
}

std::string format_p(std::optional<double> p) {
  if (!p) return "-";
  if (*p < 0.001) return "<0.001";
  return printf_string("%.3f", *p);
}

}  // namespace sparkglm::reports
