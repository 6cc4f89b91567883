#include "reports/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reports/html_escape.h"
#include "reports/metric_row.h"
#include "reports/text_table.h"

namespace sparkglm::reports {

namespace {

constexpr double kWidth = 760;
constexpr double kTop = 30;     // room for the heading line
constexpr double kBottom = 34;  // room for the axis labels

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// Round ticks need no trailing zeros: "20", "0.25", "1.1".
std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Maps a value onto [left, right] pixels of the plotting area.
struct Scale {
  double lo, hi, left, right;
  double x(double v) const {
    const double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    return left + std::clamp(t, 0.0, 1.0) * (right - left);
  }
};

std::string series_color(const std::string& label) {
  if (label == "baseline") return "#7a7a7a";
  if (label == "candidate" || label == "measured") return "#1f6fb4";
  return "#8e44ad";
}

std::string verdict_color(const std::string& verdict) {
  if (verdict == "better") return "#2e7d32";
  if (verdict == "worse") return "#c62828";
  return "#555555";
}

// Nearest-rank quantile of sorted values (QUALIFICATION.md states one percentile method).
double nearest_rank(const std::vector<double>& sorted, double q) {
  const double rank = std::ceil(q * static_cast<double>(sorted.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, double(sorted.size()))) - 1;
  return sorted[i];
}

void open_svg(std::ostringstream& svg, const std::string& title, double height) {
  svg << "<svg class=\"chart\" viewBox=\"0 0 " << num(kWidth) << ' ' << num(height) << "\" width=\""
      << num(kWidth) << "\" height=\"" << num(height) << "\" role=\"img\">"
      << "<title>" << escape_html(title) << "</title>"
      << "<rect x=\"0\" y=\"0\" width=\"" << num(kWidth) << "\" height=\"" << num(height)
      << "\" fill=\"#ffffff\"/>"
      << "<text x=\"8\" y=\"18\" class=\"heading\">" << escape_html(title) << "</text>";
}

void axis(std::ostringstream& svg, const Scale& s, const std::vector<double>& ticks, double top,
          double bottom, const std::string& unit) {
  for (double t : ticks) {
    const std::string x = num(s.x(t));
    svg << "<line x1=\"" << x << "\" y1=\"" << num(top) << "\" x2=\"" << x << "\" y2=\""
        << num(bottom) << "\" stroke=\"#e3e3e3\"/>"
        << "<text x=\"" << x << "\" y=\"" << num(bottom + 14)
        << "\" text-anchor=\"middle\" class=\"tick\">" << tick_label(t) << "</text>";
  }
  svg << "<text x=\"" << num((s.left + s.right) / 2) << "\" y=\"" << num(bottom + 28)
      << "\" text-anchor=\"middle\" class=\"tick\">" << escape_html(unit) << "</text>";
}

}  // namespace

std::vector<double> axis_ticks(double lo, double hi, int count) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo <= 0) {
    const double pad = lo != 0 ? std::fabs(lo) * 0.1 : 1.0;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(count - 1, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(lo / step) * step;
  for (double t = first; ticks.empty() || ticks.back() < hi - step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string distribution_chart(const std::string& title, const std::string& unit,
                               const std::vector<DistributionSeries>& series) {
  constexpr double kRow = 46, kLeft = 150, kRight = kWidth - 24;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : series)
    for (double v : s.values)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (lo > hi) lo = 0, hi = 1;
  const std::vector<double> ticks = axis_ticks(std::min(lo, 0.0), hi);
  const Scale scale{ticks.front(), ticks.back(), kLeft, kRight};
  const double plot_bottom = kTop + kRow * static_cast<double>(std::max<size_t>(series.size(), 1));
  std::ostringstream svg;
  open_svg(svg, title, plot_bottom + kBottom);
  axis(svg, scale, ticks, kTop, plot_bottom, unit);
  for (size_t i = 0; i < series.size(); ++i) {
    const DistributionSeries& s = series[i];
    const double y = kTop + kRow * (static_cast<double>(i) + 0.5);
    const std::string color = series_color(s.label);
    svg << "<g class=\"series\"><text x=\"8\" y=\"" << num(y + 4) << "\" class=\"label\">"
        << escape_html(fit_width(s.label, 14) + " (n=" + std::to_string(s.values.size()) + ")")
        << "</text>";
    std::vector<double> sorted;
    for (double v : s.values)
      if (std::isfinite(v)) sorted.push_back(v);
    std::sort(sorted.begin(), sorted.end());
    if (sorted.empty()) {
      svg << "<text x=\"" << num(kLeft) << "\" y=\"" << num(y + 4)
          << "\" class=\"tick\">no samples</text></g>";
      continue;
    }
    const double q1 = scale.x(nearest_rank(sorted, 0.25)), q3 = scale.x(nearest_rank(sorted, 0.75));
    const double med = scale.x(nearest_rank(sorted, 0.5));
    const double x0 = scale.x(sorted.front()), x1 = scale.x(sorted.back());
    svg << "<line x1=\"" << num(x0) << "\" y1=\"" << num(y) << "\" x2=\"" << num(x1) << "\" y2=\""
        << num(y) << "\" stroke=\"" << color << "\"/>";
    for (double x : {x0, x1})
      svg << "<line x1=\"" << num(x) << "\" y1=\"" << num(y - 8) << "\" x2=\"" << num(x)
          << "\" y2=\"" << num(y + 8) << "\" stroke=\"" << color << "\"/>";
    svg << "<rect x=\"" << num(q1) << "\" y=\"" << num(y - 11) << "\" width=\""
        << num(std::max(q3 - q1, 1.0)) << "\" height=\"22\" fill=\"" << color
        << "\" fill-opacity=\"0.18\" stroke=\"" << color << "\"/>"
        << "<line x1=\"" << num(med) << "\" y1=\"" << num(y - 11) << "\" x2=\"" << num(med)
        << "\" y2=\"" << num(y + 11) << "\" stroke=\"" << color << "\" stroke-width=\"2.5\"/>";
    // Every sample as a dot, spread vertically by a fixed sequence so that the page is
    // reproducible byte for byte.
    for (size_t k = 0; k < s.values.size(); ++k) {
      if (!std::isfinite(s.values[k])) continue;
      const double jitter = std::fmod(static_cast<double>(k) * 0.6180339887, 1.0) * 16 - 8;
      svg << "<circle class=\"sample\" cx=\"" << num(scale.x(s.values[k])) << "\" cy=\""
          << num(y + jitter) << "\" r=\"2.6\" fill=\"" << color << "\" fill-opacity=\"0.75\">"
          << "<title>" << escape_html(format_value(s.values[k]) + " " + unit) << "</title>"
          << "</circle>";
    }
    svg << "</g>";
  }
  svg << "</svg>";
  return svg.str();
}

std::string ratio_chart(const std::string& title, const std::vector<RatioPoint>& points) {
  constexpr double kRow = 30, kLeft = 250, kRight = kWidth - 210;
  double lo = 1, hi = 1;
  for (const RatioPoint& p : points)
    for (std::optional<double> v : {std::optional<double>(p.ratio), p.lo, p.hi})
      if (v && std::isfinite(*v)) lo = std::min(lo, *v), hi = std::max(hi, *v);
  lo = std::min(lo, 0.95);
  hi = std::max(hi, 1.05);
  const std::vector<double> ticks = axis_ticks(lo, hi);
  const Scale scale{ticks.front(), ticks.back(), kLeft, kRight};
  const double plot_bottom = kTop + kRow * static_cast<double>(std::max<size_t>(points.size(), 1));
  std::ostringstream svg;
  open_svg(svg, title, plot_bottom + kBottom);
  axis(svg, scale, ticks, kTop, plot_bottom, "candidate / baseline");
  const std::string one = num(scale.x(1.0));
  svg << "<line class=\"unity\" x1=\"" << one << "\" y1=\"" << num(kTop) << "\" x2=\"" << one
      << "\" y2=\"" << num(plot_bottom) << "\" stroke=\"#222222\" stroke-dasharray=\"4 3\"/>";
  for (size_t i = 0; i < points.size(); ++i) {
    const RatioPoint& p = points[i];
    const double y = kTop + kRow * (static_cast<double>(i) + 0.5);
    const std::string color = verdict_color(p.verdict);
    svg << "<g class=\"ratio\"><title>" << escape_html(p.label + ": " + p.note + " " + p.verdict)
        << "</title><text x=\"8\" y=\"" << num(y + 4) << "\" class=\"label\">"
        << escape_html(fit_width(p.label, 38)) << "</text>";
    if (p.lo && p.hi && std::isfinite(*p.lo) && std::isfinite(*p.hi)) {
      const double x0 = scale.x(*p.lo), x1 = scale.x(*p.hi);
      svg << "<line class=\"whisker\" x1=\"" << num(x0) << "\" y1=\"" << num(y) << "\" x2=\""
          << num(x1) << "\" y2=\"" << num(y) << "\" stroke=\"" << color
          << "\" stroke-width=\"2\"/>";
      for (double x : {x0, x1})
        svg << "<line x1=\"" << num(x) << "\" y1=\"" << num(y - 6) << "\" x2=\"" << num(x)
            << "\" y2=\"" << num(y + 6) << "\" stroke=\"" << color << "\" stroke-width=\"2\"/>";
    }
    if (std::isfinite(p.ratio))
      svg << "<circle cx=\"" << num(scale.x(p.ratio)) << "\" cy=\"" << num(y)
          << "\" r=\"4.5\" fill=\"" << color << "\"/>";
    svg << "<text x=\"" << num(kRight + 10) << "\" y=\"" << num(y + 4) << "\" class=\"tick\">"
        << escape_html(fit_width(p.note + " " + p.verdict, 36)) << "</text></g>";
  }
  svg << "</svg>";
  return svg.str();
}

}  // namespace sparkglm::reports
