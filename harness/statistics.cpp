#include "harness/statistics.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "engine/core/error.h"

namespace sparkglm::harness {
namespace {

void check_sample(const std::vector<double>& xs, const char* function, const char* name) {
  if (xs.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string(function) + ": `" + name + "` is empty; expected at least one value");
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!std::isfinite(xs[i])) {
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(function) + ": `" + name + "[" + std::to_string(i) + "]` is " +
                      std::to_string(xs[i]) + "; expected a finite number");
    }
  }
}

// Median of a non-empty buffer, reordering it; the bootstrap calls this on a reused scratch buffer.
double median_in_place(std::vector<double>& xs) {
  const size_t half = xs.size() / 2;
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(half), xs.end());
  const double upper = xs[half];
  if (xs.size() % 2 == 1) return upper;
  // After nth_element everything before `half` is <= upper; the lower middle is their maximum.
  const double lower =
      *std::max_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(half));
  return (lower + upper) / 2;  // as numpy's median, so its numbers match bit for bit
}

// 1-based nearest rank of percentile p among n values (see the header for the snapping rule).
size_t nearest_rank(double p, size_t n) {
  const double x = p * static_cast<double>(n) / 100.0;
  const double nearest = std::round(x);
  const double rank = std::fabs(x - nearest) <= 1e-9 ? nearest : std::ceil(x);
  return static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(n)));
}

// The pooled sample's rank statistics: U of a and the sizes of its tie groups (only groups > 1).
struct RankSums {
  double u_a = 0;
  std::vector<double> tie_sizes;
};

RankSums rank_sums(const std::vector<double>& a, const std::vector<double>& b,
                   const char* function) {
  check_sample(a, function, "a");
  check_sample(b, function, "b");
  std::vector<std::pair<double, bool>> pooled;  // (value, belongs to a)
  pooled.reserve(a.size() + b.size());
  for (double x : a) pooled.emplace_back(x, true);
  for (double y : b) pooled.emplace_back(y, false);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& l, const auto& r) { return l.first < r.first; });
  RankSums out;
  double rank_sum_a = 0;
  for (size_t start = 0; start < pooled.size();) {
    size_t end = start + 1;
    while (end < pooled.size() && pooled[end].first == pooled[start].first) ++end;
    // Ranks start+1 .. end share their average.
    const double average_rank = (static_cast<double>(start + 1) + static_cast<double>(end)) / 2;
    for (size_t i = start; i < end; ++i) {
      if (pooled[i].second) rank_sum_a += average_rank;
    }
    if (end - start > 1) out.tie_sizes.push_back(static_cast<double>(end - start));
    start = end;
  }
  const double n_a = static_cast<double>(a.size());
  out.u_a = rank_sum_a - n_a * (n_a + 1) / 2;
  return out;
}

// P(U <= k) under the null with sizes m and n and no ties. The probability that U of the first
// sample is u, f(i, j, u), follows from where the largest pooled value came from: from the first
// sample (probability i / (i + j)) it beats all j of the second, so
//   f(i, j, u) = i / (i + j) f(i - 1, j, u - j) + j / (i + j) f(i, j - 1, u),
// with f(0, j, 0) = f(i, 0, 0) = 1. Only positive terms are added, so the small tail keeps its
// relative precision (a sum of counts over C(m + n, m) would overflow long before m = n = 50).
double mann_whitney_lower_tail(size_t m, size_t n, size_t k) {
  std::vector<std::vector<double>> previous(n + 1, std::vector<double>{1.0});  // f(0, j, .)
  for (size_t i = 1; i <= m; ++i) {
    std::vector<std::vector<double>> current(n + 1);
    current[0] = {1.0};
    for (size_t j = 1; j <= n; ++j) {
      std::vector<double>& f = current[j];
      f.assign(i * j + 1, 0.0);
      const double from_first = static_cast<double>(i) / static_cast<double>(i + j);
      const double from_second = static_cast<double>(j) / static_cast<double>(i + j);
      const std::vector<double>& drop_first = previous[j];      // f(i - 1, j, .), size (i-1) j + 1
      const std::vector<double>& drop_second = current[j - 1];  // f(i, j - 1, .), size i (j-1) + 1
      for (size_t u = 0; u < drop_first.size(); ++u) f[u + j] += from_first * drop_first[u];
      for (size_t u = 0; u < drop_second.size(); ++u) f[u] += from_second * drop_second[u];
    }
    previous = std::move(current);
  }
  const std::vector<double>& f = previous[n];
  double tail = 0;
  for (size_t u = 0; u <= k && u < f.size(); ++u) tail += f[u];
  return tail;
}

}  // namespace

double median(std::vector<double> xs) {
  check_sample(xs, "median", "xs");
  return median_in_place(xs);
}

double percentile_nearest_rank(std::vector<double> xs, double p) {
  check_sample(xs, "percentile_nearest_rank", "xs");
  if (!(p > 0 && p <= 100)) {
    throw Error(ErrorKind::kInvalidArgument,
                "percentile_nearest_rank: `p` is " + std::to_string(p) + "; expected (0, 100]");
  }
  const size_t index = nearest_rank(p, xs.size()) - 1;
  std::nth_element(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(index), xs.end());
  return xs[index];
}

Summary summarize(const std::vector<double>& xs) {
  check_sample(xs, "summarize", "xs");
  Summary s;
  s.median = median(xs);
  const auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
  s.min = *lo;
  s.max = *hi;
  s.n = static_cast<int32_t>(xs.size());
  return s;
}

uint64_t SplitMix64::next() {
  state_ += 0x9E3779B97F4A7C15ULL;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t n) {
  SPARKGLM_ASSERT(n >= 1, "SplitMix64::below needs n >= 1");
  const uint64_t threshold = (0 - n) % n;  // (2^64 - n) mod n == 2^64 mod n
  for (;;) {
    const uint64_t x = next();
    if (x >= threshold) return x % n;
  }
}

double median_ratio(double baseline_median, double candidate_median) {
  if (candidate_median == baseline_median) return 1.0;  // also 0 / 0: nothing changed
  return candidate_median / baseline_median;
}

RatioInterval bootstrap_median_ratio_ci(const std::vector<double>& baseline,
                                        const std::vector<double>& candidate, uint64_t seed,
                                        int32_t resamples, double level) {
  check_sample(baseline, "bootstrap_median_ratio_ci", "baseline");
  check_sample(candidate, "bootstrap_median_ratio_ci", "candidate");
  if (resamples < 1) {
    throw Error(ErrorKind::kInvalidArgument, "bootstrap_median_ratio_ci: `resamples` is " +
                                                 std::to_string(resamples) +
                                                 "; expected at least 1");
  }
  if (!(level > 0 && level < 1)) {
    throw Error(ErrorKind::kInvalidArgument, "bootstrap_median_ratio_ci: `level` is " +
                                                 std::to_string(level) + "; expected (0, 1)");
  }
  SplitMix64 generator(seed);
  std::vector<double> scratch;
  const auto resampled_median = [&](const std::vector<double>& xs) {
    scratch.resize(xs.size());
    for (double& x : scratch) x = xs[generator.below(xs.size())];
    return median_in_place(scratch);
  };
  std::vector<double> ratios(static_cast<size_t>(resamples));
  for (double& ratio : ratios) {
    const double baseline_median = resampled_median(baseline);
    ratio = median_ratio(baseline_median, resampled_median(candidate));
  }
  std::sort(ratios.begin(), ratios.end());
  RatioInterval ci;
  ci.lo = ratios[nearest_rank(100 * (1 - level) / 2, ratios.size()) - 1];
  ci.hi = ratios[nearest_rank(100 * (1 + level) / 2, ratios.size()) - 1];
  return ci;
}

double mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b) {
  return rank_sums(a, b, "mann_whitney_u").u_a;
}

double mann_whitney_p_exact(const std::vector<double>& a, const std::vector<double>& b) {
  const RankSums r = rank_sums(a, b, "mann_whitney_p_exact");
  if (!r.tie_sizes.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "mann_whitney_p_exact: the pooled sample has tied values; expected none (use "
                "mann_whitney_p_normal)");
  }
  const size_t m = a.size(), n = b.size();
  const size_t bound = static_cast<size_t>(kMannWhitneyExactMaxSize);
  if (m > bound || n > bound) {
    throw Error(ErrorKind::kInvalidArgument,
                "mann_whitney_p_exact: samples of " + std::to_string(m) + " and " +
                    std::to_string(n) + " values; expected at most " +
                    std::to_string(kMannWhitneyExactMaxSize) + " each");
  }
  const double mn = static_cast<double>(m * n);
  const double u = std::max(r.u_a, mn - r.u_a);
  // P(U >= u) = P(U <= mn - u) by symmetry; mn - u <= mn / 2 is the small tail.
  const double tail = mann_whitney_lower_tail(m, n, static_cast<size_t>(mn - u));
  return std::min(1.0, 2 * tail);
}

double mann_whitney_p_normal(const std::vector<double>& a, const std::vector<double>& b) {
  const RankSums r = rank_sums(a, b, "mann_whitney_p_normal");
  const double n_a = static_cast<double>(a.size()), n_b = static_cast<double>(b.size());
  const double n = n_a + n_b;
  double tie_term = 0;
  for (double t : r.tie_sizes) tie_term += t * t * t - t;
  const double variance = n_a * n_b / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (!(variance > 0)) return 1.0;  // every pooled value equal: no evidence either way
  const double u = std::max(r.u_a, n_a * n_b - r.u_a);
  const double z = (u - n_a * n_b / 2 - 0.5) / std::sqrt(variance);
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));  // 2 Q(z) = erfc(z / sqrt 2)
}

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const RankSums r = rank_sums(a, b, "mann_whitney_p");
  const size_t bound = static_cast<size_t>(kMannWhitneyExactMaxSize);
  const bool small = a.size() <= bound && b.size() <= bound;
  return r.tie_sizes.empty() && small ? mann_whitney_p_exact(a, b) : mann_whitney_p_normal(a, b);
}

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kBetter:
      return "better";
    case Verdict::kWorse:
      return "worse";
    case Verdict::kNeutralNoisy:
      return "neutral-noisy";
  }
  return "neutral-noisy";
}

Comparison compare_samples(const std::vector<double>& baseline,
                           const std::vector<double>& candidate, Direction direction,
                           double min_effect_pct, double alpha) {
  check_sample(baseline, "compare_samples", "baseline");
  check_sample(candidate, "compare_samples", "candidate");
  if (!(min_effect_pct >= 0 && std::isfinite(min_effect_pct))) {
    throw Error(ErrorKind::kInvalidArgument, "compare_samples: `min_effect_pct` is " +
                                                 std::to_string(min_effect_pct) +
                                                 "; expected a finite percentage >= 0");
  }
  if (!(alpha > 0 && alpha < 1)) {
    throw Error(ErrorKind::kInvalidArgument,
                "compare_samples: `alpha` is " + std::to_string(alpha) + "; expected (0, 1)");
  }
  Comparison c;
  c.baseline = summarize(baseline);
  c.candidate = summarize(candidate);
  c.change_pct = (median_ratio(c.baseline.median, c.candidate.median) - 1) * 100;
  c.ci95 = bootstrap_median_ratio_ci(baseline, candidate);
  c.p = mann_whitney_p(baseline, candidate);
  const bool significant = c.p < alpha;
  const bool went_up = c.ci95.lo > 1 && c.change_pct >= min_effect_pct && significant;
  const bool went_down = c.ci95.hi < 1 && c.change_pct <= -min_effect_pct && significant;
  if (went_up) {
    c.verdict = direction == Direction::kHigherIsBetter ? Verdict::kBetter : Verdict::kWorse;
  } else if (went_down) {
    c.verdict = direction == Direction::kHigherIsBetter ? Verdict::kWorse : Verdict::kBetter;
  }
  return c;
}

}  // namespace sparkglm::harness
