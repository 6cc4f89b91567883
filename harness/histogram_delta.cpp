#include "harness/histogram_delta.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "engine/core/error.h"

namespace sparkglm::harness {

namespace {

double value_or_zero(const std::map<std::string, double>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? 0.0 : it->second;
}

double bound_of(const std::string& label, const std::string& key) {
  if (label == "+Inf") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double v = std::strtod(label.c_str(), &end);
  if (label.empty() || end != label.c_str() + label.size() || !std::isfinite(v))
    throw Error(ErrorKind::kIo, "metrics: histogram bucket " + key + " has no numeric bound");
  return v;
}

double delta(const std::map<std::string, double>& before, double after, const std::string& key) {
  const double d = after - value_or_zero(before, key);
  if (d < 0)
    throw Error(ErrorKind::kIo,
                "metrics: " + key + " went down between the scrapes (did the server restart?)");
  return d;
}

}  // namespace

double HistogramDelta::quantile_bound(double q) const {
  for (const auto& [le, n] : buckets)
    if (n >= q * count) return le;
  return std::numeric_limits<double>::infinity();
}

std::optional<HistogramDelta> histogram_delta(const std::map<std::string, double>& before,
                                              const std::map<std::string, double>& after,
                                              const std::string& name) {
  const std::string prefix = name + "_bucket{le=\"";
  HistogramDelta h;
  for (auto it = after.lower_bound(prefix); it != after.end(); ++it) {
    const std::string& key = it->first;
    if (key.compare(0, prefix.size(), prefix) != 0) break;
    if (key.size() < prefix.size() + 2 || key.compare(key.size() - 2, 2, "\"}") != 0)
      throw Error(ErrorKind::kIo, "metrics: unexpected labels on " + key);
    const std::string label = key.substr(prefix.size(), key.size() - prefix.size() - 2);
    h.buckets.emplace_back(bound_of(label, key), delta(before, it->second, key));
  }
  if (h.buckets.empty()) return std::nullopt;
  std::sort(h.buckets.begin(), h.buckets.end());
  const auto count = after.find(name + "_count");
  h.count = count == after.end() ? h.buckets.back().second
                                 : delta(before, count->second, name + "_count");
  const auto sum = after.find(name + "_sum");
  if (sum != after.end()) h.sum = sum->second - value_or_zero(before, name + "_sum");
  return h;
}

}  // namespace sparkglm::harness
