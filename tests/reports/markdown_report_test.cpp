#include "reports/markdown_report.h"

#include <gtest/gtest.h>

#include <sstream>

#include "reports/metric_row.h"
#include "tests/reports/fixture_bundles.h"

namespace sparkglm::reports {
namespace {

using testing::fixture;
using testing::kAbId;
using testing::kMeasurementId;
using testing::ScratchBundle;

// The cells of a Markdown table row, splitting on '|' not preceded by a backslash.
size_t cell_count(const std::string& line) {
  size_t pipes = 0;
  for (size_t i = 0; i < line.size(); ++i)
    if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ++pipes;
  return pipes - 1;
}

// Every table (a run of lines starting with '|') has the same cell count on every line.
void expect_tables_well_formed(const std::string& md) {
  std::istringstream in(md);
  size_t columns = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '|') {
      columns = 0;
      continue;
    }
    if (columns == 0) columns = cell_count(line);
    EXPECT_EQ(cell_count(line), columns) << line;
  }
}

TEST(MarkdownReport, MeasurementHasTheCardsSectionsAsTables) {
  const BundleView bundle = load_bundle(fixture(kMeasurementId));
  const std::string md = render_markdown(bundle);
  expect_tables_well_formed(md);
  EXPECT_EQ(md.rfind("# PASS: G2 tinyGLM measurement", 0), 0u) << md.substr(0, 80);
  for (const char* want :
       {"## System", "## Results", "## Gates", "## Limitations",
        "| case | metric | unit | n | measured |", "| host | fixture-host", "| G2 | pass |"})
    EXPECT_NE(md.find(want), std::string::npos) << want;
  for (const MetricRow& row : metric_rows(bundle.record))
    EXPECT_NE(md.find("| " + row.name + " | " + row.unit + " | 3 | " +
                      format_range(*row.candidate) + " |"),
              std::string::npos)
        << row.name;
  EXPECT_EQ(md.find("## A/B"), std::string::npos);
  EXPECT_NE(md.find("`" + bundle.qualification_sha256 + "`"), std::string::npos);
}

TEST(MarkdownReport, AbHasTheAbTable) {
  const BundleView bundle = load_bundle(fixture(kAbId));
  const std::string md = render_markdown(bundle);
  expect_tables_well_formed(md);
  EXPECT_NE(md.find("| case | metric | better | change | 95% CI | p | verdict |"),
            std::string::npos);
  for (const MetricRow& row : metric_rows(bundle.record))
    EXPECT_NE(md.find(format_change_pct(row.change_pct) + " | " + format_ci(row.ci_lo, row.ci_hi) +
                      " | " + format_p(row.p) + " | " + row.verdict + " |"),
              std::string::npos)
        << row.name;
}

TEST(MarkdownReport, RecordTextCannotBreakATableOrInjectHtml) {
  ScratchBundle copy(kAbId, "md-escape");
  copy.edit("qualification.json", [](nlohmann::json& j) {
    j["title"] = "pipes | and <script>alert(1)</script>";
    j["gates"][1]["summary"] = "a | b\nnew line `code` *bold* [link](x)";
    j["limitations"] = {"<img src=x onerror=alert(1)>"};
  });
  const std::string md = render_markdown(copy.load());
  expect_tables_well_formed(md);
  EXPECT_EQ(md.find("<script"), std::string::npos);
  EXPECT_EQ(md.find("<img"), std::string::npos);
  EXPECT_NE(md.find("pipes \\| and &lt;script&gt;"), std::string::npos);
  EXPECT_NE(md.find("a \\| b new line \\`code\\` \\*bold\\* [link\\](x)"), std::string::npos);
}

}  // namespace
}  // namespace sparkglm::reports
