#pragma once
// One entry of `qualification.json`'s `metrics` array, read leniently for display: a renderer must
// show a bundle even when a field is absent, so missing values are empty optionals, not errors.
// Metrics in seconds are shown in milliseconds (values and samples scaled, unit "ms").
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::reports {

struct ArmStats {
  double median = 0, min = 0, max = 0;
  std::vector<double> samples;  // one per repetition
};

struct MetricRow {
  std::string name, unit, workload, case_id;
  std::string direction;  // "higher" / "lower": which is better
  int n = 0;
  std::optional<ArmStats> baseline, candidate;
  std::optional<double> change_pct, ci_lo, ci_hi, p;
  std::string verdict;  // better / worse / neutral-noisy / measured

  // "workload / case", or whichever of the two is present.
  std::string cell() const;
  // candidate / baseline as a ratio: 1 + change_pct / 100, else from the medians.
  std::optional<double> ratio() const;
};

std::vector<MetricRow> metric_rows(const nlohmann::json& record);

// Number formatting shared by the card, the Markdown and the HTML, so that all three agree.
std::string format_value(double v);                        // about four significant digits
std::string format_range(const ArmStats& arm);             // "10.5 [9.5 .. 11.5]"
std::string format_change_pct(std::optional<double> pct);  // "+5.0%"
std::string format_ci(std::optional<double> lo, std::optional<double> hi);  // "[0.980, 1.120]"
std::string format_p(std::optional<double> p);                              // "0.400", "<0.001"

}  // namespace sparkglm::reports
