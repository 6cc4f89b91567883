#pragma once
// The statistics of an A/B qualification (QUALIFICATION.md, "Statistics and A/B"): per-arm median
// and range, a bootstrap CI of the median ratio, a two-sided Mann-Whitney U p-value, and the
// better / worse / neutral-noisy verdict built from them. docs/statistics.md states each definition
// so that a reader can recompute every number of a bundle from its samples.
//
// Every function rejects an empty sample or a non-finite value with a sparkglm::Error
// (kInvalidArgument) naming the argument; nothing here reads a clock or a global generator, so the
// same samples always give the same bytes.
#include <cstdint>
#include <vector>

namespace sparkglm::harness {

// The median: the middle value, or the mean of the two middle values of an even-sized sample.
double median(std::vector<double> xs);

// Nearest-rank percentile: the value of 1-based rank ceil(p / 100 * n) in sorted order, p in
// (0, 100]. p * n / 100 within 1e-9 of an integer counts as that integer, so that the 2.5th
// percentile of 10000 values is rank 250 even though (1 - 0.95) / 2 * 100 is 2.5000000000000022.
double percentile_nearest_rank(std::vector<double> xs, double p);

struct Summary {
  double median = 0, min = 0, max = 0;
  int32_t n = 0;
};
Summary summarize(const std::vector<double>& xs);

// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014):
//   state += 0x9E3779B97F4A7C15
//   z = state; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//   return z ^ (z >> 31)                                    (all arithmetic modulo 2^64)
// Written out here rather than taken from <random> because the standard distributions are
// implementation-defined: the bootstrap must give the same interval on every compiler.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform on [0, n), n >= 1, without modulo bias: draws x = next() until x >= (2^64 - n) mod n
  // (the count of low values that would make some residues more likely), then returns x mod n.
  uint64_t below(uint64_t n);

 private:
  uint64_t state_;
};

struct RatioInterval {
  double lo = 0, hi = 0;
};

// median(candidate) / median(baseline) with 0 / 0 read as 1 (no change) and c / 0 as +-inf. Meant
// for non-negative metrics (latencies, rates, counts).
double median_ratio(double baseline_median, double candidate_median);

// Percentile bootstrap of median(candidate) / median(baseline). One SplitMix64(seed) feeds all
// draws; each of `resamples` rounds first draws baseline.size() indices with below(baseline.size())
// (in order, with replacement) and takes the median of those values, then does the same for the
// candidate, and records median_ratio of the two. lo and hi are the nearest-rank percentiles
// 100 * (1 - level) / 2 and 100 * (1 + level) / 2 of the recorded ratios.
RatioInterval bootstrap_median_ratio_ci(const std::vector<double>& baseline,
                                        const std::vector<double>& candidate,
                                        uint64_t seed = 20261129, int32_t resamples = 10000,
                                        double level = 0.95);

// Mann-Whitney U of sample a: the number of pairs (x in a, y in b) with x > y, plus half the pairs
// with x == y (equal to the rank sum of a in the pooled sample, average ranks for ties, minus
// n_a (n_a + 1) / 2). U of b is n_a n_b - U of a.
double mann_whitney_u(const std::vector<double>& a, const std::vector<double>& b);

// Both samples at most this size and no tie in the pooled sample: the exact null distribution.
inline constexpr int32_t kMannWhitneyExactMaxSize = 50;

// Two-sided p-value: mann_whitney_p_exact when the pooled sample has no ties and both samples have
// at most kMannWhitneyExactMaxSize values, mann_whitney_p_normal otherwise.
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);
// min(1, 2 P(U >= max(U_a, U_b))) under the exact distribution of U with no ties. Throws when the
// samples tie or exceed kMannWhitneyExactMaxSize.
double mann_whitney_p_exact(const std::vector<double>& a, const std::vector<double>& b);
// min(1, 2 Q(z)), z = (max(U_a, U_b) - n_a n_b / 2 - 0.5) / sigma, with the tie-corrected
// sigma^2 = n_a n_b / 12 ((n + 1) - sum(t^3 - t) / (n (n - 1))) over tie groups of size t, Q the
// standard normal upper tail; 1 when sigma is 0 (every value equal).
double mann_whitney_p_normal(const std::vector<double>& a, const std::vector<double>& b);

enum class Direction { kHigherIsBetter, kLowerIsBetter };
enum class Verdict { kBetter, kWorse, kNeutralNoisy };
const char* to_string(Verdict v);  // "better" / "worse" / "neutral-noisy"

struct Comparison {
  Summary baseline, candidate;
  double change_pct = 0;  // (median_ratio - 1) * 100
  RatioInterval ci95;     // bootstrap_median_ratio_ci with its default seed, resamples and level
  double p = 1;           // mann_whitney_p(baseline, candidate)
  Verdict verdict = Verdict::kNeutralNoisy;
};

// A change counts only when all three agree: the CI of the ratio lies wholly on one side of 1, the
// point change is at least min_effect_pct in that direction, and p < alpha. The side (ratio above
// or below 1) maps to better or worse through `direction`. Anything less is neutral-noisy, so a
// gain under the declared minimum effect, or one whose CI includes no change, is not a gain.
Comparison compare_samples(const std::vector<double>& baseline,
                           const std::vector<double>& candidate, Direction direction,
                           double min_effect_pct, double alpha = 0.05);

}  // namespace sparkglm::harness
