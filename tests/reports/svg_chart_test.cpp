#include "reports/svg_chart.h"

#include <gtest/gtest.h>

namespace sparkglm::reports {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgChart, AxisTicksAreRoundAndEncloseTheRange) {
  const std::vector<double> ticks = axis_ticks(3.2, 47.9);
  ASSERT_GE(ticks.size(), 3u);
  EXPECT_LE(ticks.front(), 3.2);
  EXPECT_GE(ticks.back(), 47.9);
  EXPECT_DOUBLE_EQ(ticks[0], 0);
  EXPECT_DOUBLE_EQ(ticks[1], 20);
  // A degenerate range still gets an axis around its value.
  const std::vector<double> flat = axis_ticks(5, 5);
  EXPECT_LT(flat.front(), 5);
  EXPECT_GT(flat.back(), 5);
}

TEST(SvgChart, DistributionDrawsEverySampleAndSaysWhenAnArmHasNone) {
  const std::string svg =
      distribution_chart("TTFT <x>", "ms", {{"baseline", {1, 2, 3, 4}}, {"candidate", {}}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("<title>TTFT &lt;x&gt;</title>"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"sample\""), 4u);
  EXPECT_NE(svg.find("no samples"), std::string::npos);
  EXPECT_NE(svg.find(">baseline (n=4)<"), std::string::npos);
  EXPECT_NE(svg.find(">candidate (n=0)<"), std::string::npos);
}

TEST(SvgChart, RatioChartDrawsAWhiskerPerPointWithACi) {
  const std::string svg = ratio_chart(
      "A/B", {{"c1 / ttft", 1.2, 1.1, 1.3, "worse", "+20.0%"},
              {"c1 / rate", 0.98, std::nullopt, std::nullopt, "neutral-noisy", "-2.0%"}});
  EXPECT_EQ(count(svg, "class=\"ratio\""), 2u);
  EXPECT_EQ(count(svg, "class=\"whisker\""), 1u);
  EXPECT_EQ(count(svg, "class=\"unity\""), 1u);
  EXPECT_NE(svg.find("#c62828"), std::string::npos);  // the worse point's colour
}

}  // namespace
}  // namespace sparkglm::reports
