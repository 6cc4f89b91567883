// Arrival offsets: exact for staggered, reproducible per seed, and with the rate and shape they
// declare. Golden values were computed once from the algorithm as documented in
// arrival_schedule.h, in Python, independently of this code.
#include "harness/arrival_schedule.h"

#include <cmath>

#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace sparkglm::harness {
namespace {

using Kind = ArrivalSchedule::Kind;

ArrivalSchedule poisson(double rate, uint64_t seed) {
  ArrivalSchedule s;
  s.kind = Kind::kPoisson;
  s.rate_per_s = rate;
  s.seed = seed;
  return s;
}

ArrivalSchedule gamma(double rate, double shape, uint64_t seed) {
  ArrivalSchedule s = poisson(rate, seed);
  s.kind = Kind::kGamma;
  s.gamma_shape = shape;
  return s;
}

struct GapStats {
  double mean = 0, cv = 0;
};
GapStats gap_stats(const std::vector<double>& offsets) {
  std::vector<double> gaps;
  for (size_t i = 1; i < offsets.size(); ++i) gaps.push_back(offsets[i] - offsets[i - 1]);
  double sum = 0, sq = 0;
  for (double g : gaps) sum += g;
  const double mean = sum / gaps.size();
  for (double g : gaps) sq += (g - mean) * (g - mean);
  return {mean, std::sqrt(sq / (gaps.size() - 1)) / mean};
}

void expect_offsets_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + want[i])) << "offset " << i;
}

TEST(ArrivalSchedule, ClosedLoopAndBarrierSendEverythingAtZero) {
  for (Kind k : {Kind::kClosedLoop, Kind::kBarrier}) {
    ArrivalSchedule s;
    s.kind = k;
    s.concurrency = 4;
    EXPECT_EQ(arrival_offsets(s, 5), std::vector<double>(5, 0.0)) << to_string(k);
  }
}

TEST(ArrivalSchedule, StaggeredIsExactlyIndexTimesStagger) {
  ArrivalSchedule s;
  s.kind = Kind::kStaggered;
  s.stagger_s = 0.25;
  EXPECT_EQ(arrival_offsets(s, 4), (std::vector<double>{0.0, 0.25, 0.5, 0.75}));
  EXPECT_TRUE(arrival_offsets(s, 0).empty());
}

TEST(ArrivalSchedule, PoissonMatchesTheDocumentedGenerator) {
  expect_offsets_near(
      arrival_offsets(poisson(2.0, 42), 5),
      {0.0, 0.14949631228693613, 1.0660671448624701, 1.7050542252297778, 2.2383339085984804});
}

TEST(ArrivalSchedule, GammaMatchesTheDocumentedGenerator) {
  expect_offsets_near(
      arrival_offsets(gamma(4.0, 2.5, 7), 5),
      {0.0, 0.4860941668569323, 0.5870094887900779, 0.7289567848735856, 1.1416372583979901});
  // Shape below 1 takes the boost path (one more uniform per gap).
  expect_offsets_near(
      arrival_offsets(gamma(4.0, 0.5, 7), 5),
      {0.0, 0.5690593944972836, 0.6321079556637408, 0.6884054578765055, 0.9143507312558832});
}

TEST(ArrivalSchedule, SameSeedSameOffsetsOtherSeedOtherOffsets) {
  EXPECT_EQ(arrival_offsets(poisson(3, 1), 50), arrival_offsets(poisson(3, 1), 50));
  EXPECT_NE(arrival_offsets(poisson(3, 1), 50), arrival_offsets(poisson(3, 2), 50));
  EXPECT_EQ(arrival_offsets(gamma(3, 0.7, 9), 50), arrival_offsets(gamma(3, 0.7, 9), 50));
  // A prefix does not depend on n: a longer run extends a shorter one.
  const std::vector<double> long_run = arrival_offsets(poisson(3, 1), 100);
  EXPECT_EQ(arrival_offsets(poisson(3, 1), 50),
            std::vector<double>(long_run.begin(), long_run.begin() + 50));
}

TEST(ArrivalSchedule, PoissonGapsHaveTheDeclaredRate) {
  // 40000 exponential gaps: the mean's standard error is 0.5% of the mean, the CV's under 1%.
  const std::vector<double> offsets = arrival_offsets(poisson(5.0, 11), 40001);
  for (size_t i = 1; i < offsets.size(); ++i) ASSERT_GT(offsets[i], offsets[i - 1]);
  const GapStats g = gap_stats(offsets);
  EXPECT_NEAR(g.mean, 0.2, 0.2 * 0.025);
  EXPECT_NEAR(g.cv, 1.0, 0.05);
}

TEST(ArrivalSchedule, GammaGapsHaveTheDeclaredRateAndShape) {
  // Gamma(k) gaps scaled to mean 1/rate have coefficient of variation 1/sqrt(k).
  for (double k : {0.5, 1.0, 4.0}) {
    const GapStats g = gap_stats(arrival_offsets(gamma(2.0, k, 3), 40001));
    EXPECT_NEAR(g.mean, 0.5, 0.5 * 0.035) << "shape " << k;
    EXPECT_NEAR(g.cv, 1 / std::sqrt(k), 0.08 / std::sqrt(k)) << "shape " << k;
  }
}

TEST(ArrivalSchedule, JsonRoundTripsEveryKind) {
  const std::vector<nlohmann::json> specs = {
      {{"type", "closed"}, {"concurrency", 4}},
      {{"type", "barrier"}, {"concurrency", 2}},
      {{"type", "staggered"}, {"stagger_s", 0.25}},
      {{"type", "poisson"}, {"rate_per_s", 2.0}, {"seed", 7}},
      {{"type", "gamma"}, {"rate_per_s", 2.0}, {"gamma_shape", 0.5}, {"seed", 7}}};
  for (const nlohmann::json& j : specs) EXPECT_EQ(to_json(arrival_from_json(j)), j) << j.dump();
  EXPECT_EQ(arrival_from_json({{"type", "closed"}}).concurrency, 1);
}

void expect_error_naming(const nlohmann::json& j, const std::string& field) {
  try {
    arrival_from_json(j);
    ADD_FAILURE() << "accepted " << j.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("`" + field + "`"), std::string::npos)
        << j.dump() << " -> " << e.what();
  }
}

TEST(ArrivalSchedule, BadJsonNamesTheField) {
  expect_error_naming({{"type", "open"}}, "type");
  expect_error_naming({{"concurrency", 2}}, "type");
  expect_error_naming({{"type", "closed"}, {"concurrency", 0}}, "concurrency");
  expect_error_naming({{"type", "closed"}, {"concurrency", 1.5}}, "concurrency");
  expect_error_naming({{"type", "closed"}, {"stagger_s", 1}}, "stagger_s");
  expect_error_naming({{"type", "staggered"}}, "stagger_s");
  expect_error_naming({{"type", "staggered"}, {"stagger_s", -1}}, "stagger_s");
  expect_error_naming({{"type", "poisson"}, {"seed", 1}}, "rate_per_s");
  expect_error_naming({{"type", "poisson"}, {"rate_per_s", 0}, {"seed", 1}}, "rate_per_s");
  expect_error_naming({{"type", "poisson"}, {"rate_per_s", 1}}, "seed");
  expect_error_naming({{"type", "poisson"}, {"rate_per_s", 1}, {"seed", -3}}, "seed");
  expect_error_naming({{"type", "gamma"}, {"rate_per_s", 1}, {"seed", 1}}, "gamma_shape");
  expect_error_naming({{"type", "poisson"}, {"rate_per_s", 1}, {"seed", 1}, {"rate", 2}}, "rate");
}

}  // namespace
}  // namespace sparkglm::harness
