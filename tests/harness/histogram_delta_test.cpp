#include "harness/histogram_delta.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "engine/core/error.h"
#include "harness/server_api.h"

namespace sparkglm::harness {
namespace {

const char* kName = "sparkglm_sse_emit_delay_seconds";

std::string scrape(int a, int b, int c, int inf, double sum) {
  return std::string("# TYPE sparkglm_sse_emit_delay_seconds histogram\n") +
         "sparkglm_sse_emit_delay_seconds_bucket{le=\"0.0001\"} " + std::to_string(a) + "\n" +
         "sparkglm_sse_emit_delay_seconds_bucket{le=\"0.001\"} " + std::to_string(b) + "\n" +
         "sparkglm_sse_emit_delay_seconds_bucket{le=\"0.01\"} " + std::to_string(c) + "\n" +
         "sparkglm_sse_emit_delay_seconds_bucket{le=\"+Inf\"} " + std::to_string(inf) + "\n" +
         "sparkglm_sse_emit_delay_seconds_sum " + std::to_string(sum) + "\n" +
         "sparkglm_sse_emit_delay_seconds_count " + std::to_string(inf) + "\n";
}

TEST(HistogramDelta, ReportsOnlyWhatHappenedBetweenTheScrapes) {
  // Before: 1000 slow observations the run must not inherit. During: 100, of which 98 within
  // 100 us, 1 within 1 ms and 1 within 10 ms.
  const auto before = parse_prometheus_text(scrape(0, 0, 0, 1000, 50.0));
  const auto after = parse_prometheus_text(scrape(98, 99, 100, 1100, 50.5));
  const auto h = histogram_delta(before, after, kName);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->count, 100);
  EXPECT_NEAR(h->sum, 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(h->quantile_bound(0.50), 0.0001);
  EXPECT_DOUBLE_EQ(h->quantile_bound(0.99), 0.001);
  EXPECT_DOUBLE_EQ(h->quantile_bound(1.00), 0.01);
  ASSERT_EQ(h->buckets.size(), 4u);
  EXPECT_TRUE(std::isinf(h->buckets.back().first));
}

TEST(HistogramDelta, TailBeyondTheLastBoundIsInfinite) {
  const auto before = parse_prometheus_text(scrape(0, 0, 0, 0, 0));
  const auto after = parse_prometheus_text(scrape(1, 1, 1, 10, 3.0));
  EXPECT_TRUE(std::isinf(histogram_delta(before, after, kName)->quantile_bound(0.5)));
}

TEST(HistogramDelta, AbsentHistogramIsNoneAndACountThatWentDownIsAnError) {
  const auto before = parse_prometheus_text(scrape(5, 5, 5, 5, 1.0));
  const auto after = parse_prometheus_text(scrape(1, 1, 1, 1, 0.1));
  EXPECT_FALSE(histogram_delta(before, after, "sparkglm_other_seconds").has_value());
  try {
    histogram_delta(before, after, kName);
    FAIL() << "a restarted server's histogram was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("went down"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparkglm::harness
