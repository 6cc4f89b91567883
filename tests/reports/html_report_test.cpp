#include "reports/html_report.h"

#include <gtest/gtest.h>

#include "reports/html_escape.h"
#include "reports/metric_row.h"
#include "tests/reports/fixture_bundles.h"

namespace sparkglm::reports {
namespace {

using testing::fixture;
using testing::kAbId;
using testing::kMeasurementId;
using testing::ScratchBundle;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

size_t timed_ok_requests(const BundleView& bundle) {
  size_t n = 0;
  for (const auto& r : bundle.requests) n += r.repetition >= 0 && r.ok;
  return n;
}

// Self-contained: no script, no external reference of any kind.
void expect_self_contained(const std::string& html) {
  for (const char* banned : {"<script", "http://", "https://", "src=", "href=", "@import", "url("})
    EXPECT_EQ(html.find(banned), std::string::npos) << "found " << banned;
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
}

TEST(HtmlReport, MeasurementHasTwoDistributionChartsPerCase) {
  const BundleView bundle = load_bundle(fixture(kMeasurementId));
  const std::string html = render_html(bundle);
  expect_self_contained(html);
  for (const char* c : {"tinyglm-gate / decode_c1", "tinyglm-gate / mixed_c4"}) {
    EXPECT_NE(html.find("<title>TTFT per request, " + std::string(c) + "</title>"),
              std::string::npos)
        << c;
    EXPECT_NE(html.find("<title>Decode rate per request, " + std::string(c) + "</title>"),
              std::string::npos)
        << c;
  }
  EXPECT_EQ(count(html, "<svg"), 4u);
  // Every timed request is drawn once in its TTFT chart and once in its decode chart.
  EXPECT_EQ(count(html, "class=\"sample\""), 2 * timed_ok_requests(bundle));
  EXPECT_EQ(html.find("id=\"ab\""), std::string::npos);
  EXPECT_NE(html.find(bundle.qualification_sha256), std::string::npos);
  EXPECT_NE(html.find("<header class=\"pass\">"), std::string::npos);
}

TEST(HtmlReport, AbHasBothArmsPerChartAndARatioChartWithWhiskers) {
  const BundleView bundle = load_bundle(fixture(kAbId));
  const std::string html = render_html(bundle);
  expect_self_contained(html);
  EXPECT_EQ(count(html, "<svg"), 5u);  // 2 cases x 2 distributions + the A/B chart
  EXPECT_EQ(count(html, "class=\"sample\""), 2 * timed_ok_requests(bundle));
  EXPECT_EQ(count(html, ">baseline (n="), 4u);
  EXPECT_EQ(count(html, ">candidate (n="), 4u);
  EXPECT_NE(html.find("<title>A/B ratios with 95% CI</title>"), std::string::npos);
  size_t with_baseline = 0;
  for (const MetricRow& row : metric_rows(bundle.record)) with_baseline += row.baseline.has_value();
  EXPECT_EQ(count(html, "class=\"ratio\""), with_baseline);
  EXPECT_EQ(count(html, "class=\"whisker\""), with_baseline);
  EXPECT_EQ(count(html, "class=\"unity\""), 1u);
}

TEST(HtmlReport, RecordTextIsEscapedEverywhere) {
  ScratchBundle copy(kAbId, "html-escape");
  const std::string attack = "<script>alert(1)</script>\"><img onerror=alert(2)>'";
  copy.edit("qualification.json", [&](nlohmann::json& j) {
    j["title"] = attack;
    j["target"] = attack;
    j["limitations"] = {attack};
    j["gates"][1]["summary"] = attack;
    j["gates"][1]["criteria"][0]["name"] = attack;
    j["metrics"][0]["name"] = attack;
    j["metrics"][0]["case"] = attack;
    j["environment"]["host"] = attack;
    j["change"]["option"]["value"] = attack;
  });
  // A case id in the raw records reaches the chart titles and headings.
  std::string requests = testing::read_text(copy.dir() / "requests.jsonl");
  for (size_t at = requests.find("\"decode_c1\""); at != std::string::npos;
       at = requests.find("\"decode_c1\"", at + 1))
    requests.replace(at, 11, "\"<b onmouseover=alert(3)>c1\"");
  testing::write_text(copy.dir() / "requests.jsonl", requests);

  const std::string html = render_html(copy.load());
  expect_self_contained(html);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b "), std::string::npos);
  EXPECT_GE(count(html, escape_html(attack)), 8u);
  EXPECT_NE(html.find("&lt;b onmouseover=alert(3)&gt;c1"), std::string::npos);
}

TEST(HtmlEscape, ReplacesEveryMarkupCharacter) {
  EXPECT_EQ(escape_html("a<b>&\"c'\x01"), "a&lt;b&gt;&amp;&quot;c&#39; ");
}

}  // namespace
}  // namespace sparkglm::reports
