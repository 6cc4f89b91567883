#pragma once
// Inline SVG charts for the HTML report, drawn without scripts or external resources: a
// distribution chart (every sample as a dot over a min-max whisker and a quartile box, one row per
// arm) and an A/B chart (the ratio candidate / baseline with its 95% CI whiskers around 1.0).
#include <optional>
#include <string>
#include <vector>

namespace sparkglm::reports {

struct DistributionSeries {
  std::string label;  // the arm: "baseline", "candidate", "measured"
  std::vector<double> values;
};

// `title` becomes the SVG's <title>; an arm without samples shows "no samples".
std::string distribution_chart(const std::string& title, const std::string& unit,
                               const std::vector<DistributionSeries>& series);

struct RatioPoint {
  std::string label;  // "decode_c1 / ttft_ms"
  double ratio = 1;   // candidate / baseline
  std::optional<double> lo, hi;
  std::string verdict;  // better / worse / neutral-noisy: the point's colour
  std::string note;     // shown right of the row: "+5.0% [0.980, 1.120]"
};

std::string ratio_chart(const std::string& title, const std::vector<RatioPoint>& points);

// Round tick values covering [lo, hi] (about `count` of them); the first and last enclose both.
std::vector<double> axis_ticks(double lo, double hi, int count = 5);

}  // namespace sparkglm::reports
