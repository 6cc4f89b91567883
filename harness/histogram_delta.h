#pragma once
// A Prometheus histogram as a run saw it: the difference of two scrapes of its cumulative buckets
// (`name_bucket{le="..."}`, `name_count`, `name_sum`), so a bundle reports what happened during the
// run, never what the server accumulated before it. Quantiles are reported as the smallest bucket
// bound holding that share of the run's observations (a histogram knows no more than that).
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sparkglm::harness {

struct HistogramDelta {
  std::vector<std::pair<double, double>> buckets;  // (upper bound, cumulative count); +Inf last
  double count = 0;
  double sum = 0;

  // The smallest bound b with count(<= b) >= q * count; +infinity when only +Inf holds it.
  double quantile_bound(double q) const;
};

// `after - before` for histogram `name` in two parsed scrapes (parse_prometheus_text); nullopt
// when `after` has no such histogram. Throws Error(kIo) naming the bucket when a count went down
// (the server restarted between the scrapes) or a bound is not a number.
std::optional<HistogramDelta> histogram_delta(const std::map<std::string, double>& before,
                                              const std::map<std::string, double>& after,
                                              const std::string& name);

}  // namespace sparkglm::harness
