#include "harness/statistics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "tests/support/build_paths.h"

namespace sparkglm::harness {
namespace {

// tests/data/statistics/scipy_cases.json, written once by tools/gen_statistics_data.py.
const nlohmann::json& scipy_cases() {
  static const nlohmann::json doc = [] {
    const std::string path = sparkglm::testing::test_data_dir() + "/statistics/scipy_cases.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(in);
  }();
  return doc;
}

std::vector<double> values(const nlohmann::json& j) {
  return j.get<std::vector<double>>();
}

void expect_relative(double actual, double expected, double tolerance, const std::string& what) {
  EXPECT_LE(std::fabs(actual - expected), tolerance * std::fabs(expected))
      << what << ": got " << actual << ", expected " << expected;
}

TEST(Statistics, MedianAndUMatchScipy) {
  for (const auto& c : scipy_cases()["cases"]) {
    const std::string name = c["name"];
    const auto a = values(c["a"]), b = values(c["b"]);
    EXPECT_EQ(median(a), c["median_a"].get<double>()) << name;
    EXPECT_EQ(median(b), c["median_b"].get<double>()) << name;
    EXPECT_EQ(mann_whitney_u(a, b), c["u_a"].get<double>()) << name;
    const double u_b = static_cast<double>(a.size() * b.size()) - c["u_a"].get<double>();
    EXPECT_EQ(mann_whitney_u(b, a), u_b) << name;
  }
}

TEST(Statistics, NearestRankPercentilesMatchNumpyInvertedCdf) {
  for (const auto& c : scipy_cases()["cases"]) {
    const auto a = values(c["a"]);
    for (const auto& q : c["percentiles_a"]) {
      const double p = q["p"];
      EXPECT_EQ(percentile_nearest_rank(a, p), q["value"].get<double>()) << c["name"] << " p" << p;
    }
  }
}

TEST(Statistics, NearestRankByHand) {
  const std::vector<double> ten = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};  // sorted: 1..10
  EXPECT_EQ(percentile_nearest_rank(ten, 100), 10);
  EXPECT_EQ(percentile_nearest_rank(ten, 90), 9);     // rank 9 exactly
  EXPECT_EQ(percentile_nearest_rank(ten, 90.1), 10);  // 9.01 -> rank 10
  EXPECT_EQ(percentile_nearest_rank(ten, 70), 7);     // 0.7 * 10 is not exactly 7 in binary
  EXPECT_EQ(percentile_nearest_rank(ten, 50), 5);
  EXPECT_EQ(percentile_nearest_rank(ten, 10), 1);
  EXPECT_EQ(percentile_nearest_rank(ten, 0.001), 1);  // rank 0.0001 rounds up to the first
  const std::vector<double> five = {15, 20, 35, 40, 50};
  EXPECT_EQ(percentile_nearest_rank(five, 5), 15);   // rank ceil(0.25) = 1
  EXPECT_EQ(percentile_nearest_rank(five, 30), 20);  // rank ceil(1.5) = 2
  EXPECT_EQ(percentile_nearest_rank(five, 40), 20);  // rank 2 exactly
  EXPECT_EQ(percentile_nearest_rank(five, 50), 35);  // rank ceil(2.5) = 3
  EXPECT_EQ(percentile_nearest_rank({42}, 99.9), 42);
  // The bootstrap's lower end: 100 * (1 - 0.95) / 2 is 2.5000000000000022, still rank 250 of 10000.
  std::vector<double> many(10000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<double>(i + 1);
  EXPECT_EQ(percentile_nearest_rank(many, 100 * (1 - 0.95) / 2), 250);
  EXPECT_EQ(percentile_nearest_rank(many, 100 * (1 + 0.95) / 2), 9750);
}

TEST(Statistics, MedianByHand) {
  EXPECT_EQ(median({3}), 3);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({5, -1, 3}), 3);
  EXPECT_EQ(median({-2, -8}), -5);
  const Summary s = summarize({4, 9, 1, 7});
  EXPECT_EQ(s.median, 5.5);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 9);
  EXPECT_EQ(s.n, 4);
}

TEST(Statistics, ExactPValuesMatchScipy) {
  int checked = 0;
  for (const auto& c : scipy_cases()["cases"]) {
    if (!c.contains("p_exact")) continue;
    const auto a = values(c["a"]), b = values(c["b"]);
    const size_t bound = static_cast<size_t>(kMannWhitneyExactMaxSize);
    if (a.size() > bound || b.size() > bound) continue;
    const double expected = c["p_exact"];
    expect_relative(mann_whitney_p_exact(a, b), expected, 1e-9, c["name"].get<std::string>());
    expect_relative(mann_whitney_p_exact(b, a), expected, 1e-9, c["name"].get<std::string>());
    expect_relative(mann_whitney_p(a, b), expected, 1e-9, c["name"].get<std::string>());
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

TEST(Statistics, NormalPValuesMatchScipyAsymptotic) {
  for (const auto& c : scipy_cases()["cases"]) {
    const auto a = values(c["a"]), b = values(c["b"]);
    const double expected = c["p_asymptotic"];
    const std::string name = c["name"];
    expect_relative(mann_whitney_p_normal(a, b), expected, 1e-6, name);
    expect_relative(mann_whitney_p_normal(b, a), expected, 1e-6, name);
    // With ties or a sample over the bound, the two-sided p is the normal one.
    const size_t bound = static_cast<size_t>(kMannWhitneyExactMaxSize);
    if (!c.contains("p_exact") || a.size() > bound || b.size() > bound) {
      expect_relative(mann_whitney_p(a, b), expected, 1e-6, name);
    }
  }
}

TEST(Statistics, PValueByHand) {
  // 3 against 3, fully separated: U = 0, P(U = 0) = 1 / C(6, 3) = 1 / 20, two-sided 0.1. So three
  // pairs can never reach p < 0.05, whatever the effect.
  EXPECT_DOUBLE_EQ(mann_whitney_p({1, 2, 3}, {4, 5, 6}), 0.1);
  // 4 against 4: 2 / C(8, 4) = 2 / 70.
  EXPECT_DOUBLE_EQ(mann_whitney_p({1, 2, 3, 4}, {5, 6, 7, 8}), 2.0 / 70);
  EXPECT_EQ(mann_whitney_p({5, 5}, {5, 5, 5}), 1.0);          // all equal: no evidence
  EXPECT_THROW(mann_whitney_p_exact({1, 2}, {2, 3}), Error);  // tie
  EXPECT_THROW(mann_whitney_p_exact(std::vector<double>(51, 0.0), {1}), Error);
}

TEST(Statistics, SplitMix64MatchesPublishedSequence) {
  // The first outputs for seed 1234567, as published with the reference splitmix64.c.
  SplitMix64 g(1234567);
  for (const auto& expected : scipy_cases()["splitmix64_seed_1234567"]) {
    EXPECT_EQ(g.next(), std::stoull(expected.get<std::string>()));
  }
}

TEST(Statistics, BelowIsInRangeAndCoversIt) {
  SplitMix64 g(7);
  std::vector<int> seen(7, 0);
  for (int i = 0; i < 700; ++i) {
    const uint64_t x = g.below(7);
    ASSERT_LT(x, 7u);
    ++seen[x];
  }
  for (int count : seen) EXPECT_GT(count, 50);  // expectation 100; a stuck mapping fails this
  SplitMix64 one(3);
  EXPECT_EQ(one.below(1), 0u);
}

TEST(Statistics, BootstrapMatchesIndependentReimplementation) {
  for (const auto& c : scipy_cases()["bootstrap"]) {
    const RatioInterval ci = bootstrap_median_ratio_ci(
        values(c["baseline"]), values(c["candidate"]), c["seed"].get<uint64_t>(),
        c["resamples"].get<int32_t>(), c["level"].get<double>());
    EXPECT_EQ(ci.lo, c["lo"].get<double>()) << c["name"];
    EXPECT_EQ(ci.hi, c["hi"].get<double>()) << c["name"];
  }
}

TEST(Statistics, BootstrapIsDeterministicPerSeed) {
  const std::vector<double> b = {10.2, 9.8, 10.5, 10.1, 9.9, 10.4, 10.0, 10.3};
  const std::vector<double> c = {10.6, 10.1, 10.9, 10.4, 10.2, 10.8, 10.5, 10.7};
  const RatioInterval first = bootstrap_median_ratio_ci(b, c);
  const RatioInterval again = bootstrap_median_ratio_ci(b, c);
  EXPECT_EQ(first.lo, again.lo);
  EXPECT_EQ(first.hi, again.hi);
  const RatioInterval other = bootstrap_median_ratio_ci(b, c, 1, 10000);
  EXPECT_TRUE(other.lo != first.lo || other.hi != first.hi) << "the seed must matter";
}

TEST(Statistics, BootstrapContainsPointEstimate) {
  for (const auto& c : scipy_cases()["bootstrap"]) {
    const auto b = values(c["baseline"]), k = values(c["candidate"]);
    const double point = median_ratio(median(b), median(k));
    const RatioInterval ci = bootstrap_median_ratio_ci(b, k);
    EXPECT_LE(ci.lo, point) << c["name"];
    EXPECT_GE(ci.hi, point) << c["name"];
    EXPECT_LT(ci.lo, ci.hi) << c["name"];
  }
}

TEST(Statistics, BootstrapOfConstantEqualArmsIsOne) {
  const RatioInterval ci = bootstrap_median_ratio_ci({4, 4, 4}, {4, 4, 4, 4});
  EXPECT_EQ(ci.lo, 1);
  EXPECT_EQ(ci.hi, 1);
  const RatioInterval zeros = bootstrap_median_ratio_ci({0, 0}, {0, 0, 0});
  EXPECT_EQ(zeros.lo, 1);  // 0 / 0 reads as no change
  EXPECT_EQ(zeros.hi, 1);
}

TEST(Statistics, BootstrapOfDoubledSampleIsNearTwo) {
  std::vector<double> b, c;
  for (int i = 0; i < 20; ++i) {
    b.push_back(100 + 0.5 * i);  // 100 .. 109.5
    c.push_back(2 * b.back());
  }
  const RatioInterval ci = bootstrap_median_ratio_ci(b, c);
  EXPECT_LE(ci.lo, 2.0);
  EXPECT_GE(ci.hi, 2.0);
  EXPECT_GT(ci.lo, 1.85);
  EXPECT_LT(ci.hi, 2.15);
}

TEST(Statistics, BootstrapLevelWidensTheInterval) {
  const std::vector<double> b = {1.0, 1.3, 0.9, 1.1, 1.25, 0.95, 1.05, 1.2, 1.15, 0.85};
  const std::vector<double> c = {1.1, 1.4, 1.0, 1.2, 1.35, 1.05, 1.15, 1.3, 1.25, 0.95};
  const RatioInterval narrow = bootstrap_median_ratio_ci(b, c, 20261129, 10000, 0.5);
  const RatioInterval wide = bootstrap_median_ratio_ci(b, c, 20261129, 10000, 0.95);
  const RatioInterval widest = bootstrap_median_ratio_ci(b, c, 20261129, 10000, 0.999);
  // Same seed, same ratios: the ends move outwards as the level rises.
  EXPECT_LE(wide.lo, narrow.lo);
  EXPECT_GE(wide.hi, narrow.hi);
  EXPECT_LE(widest.lo, wide.lo);
  EXPECT_GE(widest.hi, wide.hi);
  EXPECT_GT(wide.hi - wide.lo, narrow.hi - narrow.lo);
}

std::vector<double> around(double center, double spread, int n) {
  std::vector<double> out;
  for (int i = 0; i < n; ++i) out.push_back(center + spread * ((i * 7) % n - (n - 1) / 2.0) / n);
  return out;
}

TEST(Statistics, CompareClearGainBothDirections) {
  const auto base = around(100, 4, 12), faster = around(80, 4, 12);
  // Lower latency is better.
  Comparison c = compare_samples(base, faster, Direction::kLowerIsBetter, 5);
  EXPECT_EQ(c.verdict, Verdict::kBetter) << c.change_pct << " p=" << c.p;
  EXPECT_NEAR(c.change_pct, -20, 1e-9);
  EXPECT_LT(c.ci95.hi, 1);
  EXPECT_LT(c.p, 0.001);
  EXPECT_EQ(c.baseline.n, 12);
  // The same numbers as throughput (higher is better) are a regression.
  EXPECT_EQ(compare_samples(base, faster, Direction::kHigherIsBetter, 5).verdict, Verdict::kWorse);
  // And the other way round.
  EXPECT_EQ(compare_samples(faster, base, Direction::kHigherIsBetter, 5).verdict, Verdict::kBetter);
  EXPECT_EQ(compare_samples(faster, base, Direction::kLowerIsBetter, 5).verdict, Verdict::kWorse);
}

TEST(Statistics, CompareNoisyIsNeutral) {
  const std::vector<double> b = {10, 14, 9, 13, 11, 15, 8, 12, 10.5};
  const std::vector<double> c = {11, 9.5, 14.5, 10.2, 13.1, 8.7, 12.4, 11.8, 9.1};
  const Comparison cmp = compare_samples(b, c, Direction::kHigherIsBetter, 1);
  EXPECT_EQ(cmp.verdict, Verdict::kNeutralNoisy);
  EXPECT_LE(cmp.ci95.lo, 1);
  EXPECT_GE(cmp.ci95.hi, 1);
  EXPECT_GT(cmp.p, 0.05);
}

TEST(Statistics, CompareGainUnderMinimumEffectIsNeutral) {
  // A clean 2 % gain: significant, CI excludes 1, but the declared minimum effect is 5 %.
  const auto base = around(100, 0.5, 12), up = around(102, 0.5, 12);
  const Comparison small = compare_samples(base, up, Direction::kHigherIsBetter, 5);
  EXPECT_GT(small.ci95.lo, 1);
  EXPECT_LT(small.p, 0.05);
  EXPECT_EQ(small.verdict, Verdict::kNeutralNoisy);
  EXPECT_EQ(compare_samples(base, up, Direction::kHigherIsBetter, 1).verdict, Verdict::kBetter);
}

TEST(Statistics, CompareThreePairsNeverReachesAVerdict) {
  // Fully separated by 50 %, but p = 0.1 at three samples per arm.
  const Comparison c = compare_samples({10, 11, 12}, {15, 16, 17}, Direction::kHigherIsBetter, 5);
  EXPECT_DOUBLE_EQ(c.p, 0.1);
  EXPECT_EQ(c.verdict, Verdict::kNeutralNoisy);
  EXPECT_STREQ(to_string(c.verdict), "neutral-noisy");
  EXPECT_STREQ(to_string(Verdict::kBetter), "better");
  EXPECT_STREQ(to_string(Verdict::kWorse), "worse");
}

TEST(Statistics, BadInputIsAnError) {
  const std::vector<double> empty, one = {1};
  EXPECT_THROW(median(empty), Error);
  EXPECT_THROW(percentile_nearest_rank(empty, 50), Error);
  EXPECT_THROW(percentile_nearest_rank(one, 0), Error);
  EXPECT_THROW(percentile_nearest_rank(one, 100.5), Error);
  EXPECT_THROW(percentile_nearest_rank(one, NAN), Error);
  EXPECT_THROW(summarize(empty), Error);
  EXPECT_THROW(mann_whitney_u(empty, one), Error);
  EXPECT_THROW(mann_whitney_p(one, empty), Error);
  EXPECT_THROW(bootstrap_median_ratio_ci(empty, one), Error);
  EXPECT_THROW(bootstrap_median_ratio_ci(one, one, 1, 0), Error);
  EXPECT_THROW(bootstrap_median_ratio_ci(one, one, 1, 100, 1.0), Error);
  EXPECT_THROW(compare_samples(one, empty, Direction::kLowerIsBetter, 5), Error);
  EXPECT_THROW(compare_samples(one, one, Direction::kLowerIsBetter, -1), Error);
  EXPECT_THROW(compare_samples(one, one, Direction::kLowerIsBetter, 5, 0), Error);
  EXPECT_THROW(median({1, NAN}), Error);
  try {
    compare_samples({}, one, Direction::kLowerIsBetter, 5);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("baseline"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparkglm::harness
