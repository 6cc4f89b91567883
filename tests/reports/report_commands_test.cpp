#include "reports/report_commands.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "receipts/bundle_verifier.h"
#include "reports/html_report.h"
#include "reports/markdown_report.h"
#include "reports/text_card.h"
#include "tests/reports/fixture_bundles.h"

namespace sparkglm::reports {
namespace {

using testing::fixture;
using testing::kAbId;
using testing::kMeasurementId;
using testing::read_text;
using testing::ScratchBundle;

std::set<std::string> files_under(const std::filesystem::path& dir) {
  std::set<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    files.insert(std::filesystem::relative(e.path(), dir).string());
  return files;
}

TEST(Fixtures, FollowTheBundleContract) {
  // The fixtures stand for what the runner writes, so they must pass the real verifier.
  for (const char* id : {kMeasurementId, kAbId}) {
    const receipts::Problems problems = receipts::verify_bundle(fixture(id));
    for (const receipts::Problem& p : problems) ADD_FAILURE() << id << ": " << p.to_string();
  }
}

TEST(ReportCommand, PrintsTheCardByDefaultAndEachFormatOnRequest) {
  const BundleView bundle = load_bundle(fixture(kAbId));
  std::ostringstream card, md, html, err;
  EXPECT_EQ(report_command({fixture(kAbId).string()}, card, err), 0) << err.str();
  EXPECT_EQ(card.str(), render_text_card(bundle));
  EXPECT_EQ(report_command({fixture(kAbId).string(), "--format", "md"}, md, err), 0);
  EXPECT_EQ(md.str(), render_markdown(bundle));
  EXPECT_EQ(report_command({fixture(kAbId).string(), "--format=html"}, html, err), 0);
  EXPECT_EQ(html.str(), render_html(bundle));
}

TEST(ReportCommand, WritesTheThreeFilesOutsideTheBundle) {
  ScratchBundle b(kMeasurementId, "out");
  const auto before = files_under(b.dir());
  const auto out_dir = b.root() / "rendered";
  std::ostringstream out, err;
  ASSERT_EQ(report_command({b.dir().string(), "--out", out_dir.string()}, out, err), 0)
      << err.str();
  const RenderedReport all = render_all(b.dir());
  EXPECT_EQ(read_text(out_dir / "card.txt"), all.card);
  EXPECT_EQ(read_text(out_dir / "report.md"), all.markdown);
  EXPECT_EQ(read_text(out_dir / "report.html"), all.html);
  EXPECT_EQ(out.str(), all.card);
  EXPECT_EQ(files_under(b.dir()), before);
}

TEST(ReportCommand, RefusesToWriteIntoTheBundle) {
  ScratchBundle b(kMeasurementId, "inside");
  const auto before = files_under(b.dir());
  for (const std::filesystem::path& inside :
       {b.dir(), b.dir() / "report", b.dir() / "server" / ".." / "report"}) {
    std::ostringstream out, err;
    EXPECT_EQ(report_command({b.dir().string(), "--out", inside.string()}, out, err), 2) << inside;
    EXPECT_NE(err.str().find("inside the bundle"), std::string::npos) << err.str();
  }
  EXPECT_EQ(files_under(b.dir()), before);
}

TEST(ReportCommand, BadArgumentsAndBundlesAreNamed) {
  std::ostringstream out, err;
  EXPECT_EQ(report_command({fixture(kAbId).string(), "--format", "pdf"}, out, err), 2);
  EXPECT_NE(err.str().find("--format: expected card, md or html, got \"pdf\""), std::string::npos)
      << err.str();
  err.str("");
  EXPECT_EQ(report_command({fixture(kAbId).string(), "--colour", "x"}, out, err), 2);
  EXPECT_NE(err.str().find("--colour"), std::string::npos) << err.str();
  err.str("");
  EXPECT_EQ(report_command({"/nonexistent/bundle"}, out, err), 2);
  EXPECT_NE(err.str().find("/nonexistent/bundle"), std::string::npos) << err.str();

  ScratchBundle b(kMeasurementId, "bad-record");
  std::string lines = read_text(b.dir() / "requests.jsonl");
  lines.insert(lines.find('\n') + 1, "{\"arm\": 5}\n");
  testing::write_text(b.dir() / "requests.jsonl", lines);
  err.str("");
  EXPECT_EQ(report_command({b.dir().string()}, out, err), 2);
  EXPECT_NE(err.str().find("requests.jsonl line 2"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace sparkglm::reports
