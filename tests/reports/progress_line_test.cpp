#include "reports/progress_line.h"

#include <gtest/gtest.h>

#include <sstream>

namespace sparkglm::reports {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

Progress at(const char* case_id, int32_t rep, int64_t done, double elapsed) {
  return Progress{case_id, rep, 3, done, 12, elapsed};
}

TEST(ProgressLine, DescribesCaseRepetitionCountsElapsedAndEta) {
  EXPECT_EQ(ProgressLine::describe(at("decode_c1", 1, 4, 65)),
            "decode_c1  rep 2/3  requests 4/12  elapsed 1m05s  ETA 2m10s");
  EXPECT_EQ(ProgressLine::describe(at("decode_c1", -1, 0, 2)),
            "decode_c1  warmup 1  requests 0/12  elapsed 2s  ETA ?");
  EXPECT_EQ(format_duration(7325), "2h02m");
}

TEST(ProgressLine, OnATerminalRewritesOneLine) {
  std::ostringstream out;
  ProgressLine line(out, /*terminal=*/true);
  line.update(at("mixed_c4", 0, 10, 100));
  line.update(at("a", 0, 11, 101));  // shorter: the rest of the old line is blanked
  line.finish();
  const std::string text = out.str();
  EXPECT_EQ(count(text, "\r"), 2u);
  EXPECT_EQ(count(text, "\n"), 1u);
  EXPECT_EQ(text.back(), '\n');
  std::string first = "\r", second = "\r";
  first += ProgressLine::describe(at("mixed_c4", 0, 10, 100));
  second += ProgressLine::describe(at("a", 0, 11, 101));
  EXPECT_EQ(text.substr(0, first.size()), first);
  EXPECT_EQ(text.substr(first.size(), second.size()), second);
  EXPECT_EQ(text.size(), first.size() * 2 + 1);  // padded to the longer line, then "\n"
}

TEST(ProgressLine, IntoAFilePrintsPlainLinesAtMilestonesAndIntervals) {
  std::ostringstream out;
  ProgressLine line(out, /*terminal=*/false, /*plain_interval_s=*/30);
  line.update(at("c1", 0, 1, 1));    // first: printed
  line.update(at("c1", 0, 2, 10));   // within the interval: quiet
  line.update(at("c1", 0, 3, 31));   // 30 s after the last line: printed
  line.update(at("c1", 1, 4, 32));   // a new repetition: printed
  line.update(at("c4", 1, 5, 33));   // a new case: printed
  line.update(at("c4", 1, 6, 34));   // quiet
  line.update(at("c4", 1, 12, 35));  // the last request: printed
  line.update(at("c4", 1, 12, 36));  // the last request again: already printed
  line.finish();
  const std::string text = out.str();
  EXPECT_EQ(count(text, "\r"), 0u);
  EXPECT_EQ(count(text, "\n"), 5u) << text;
  EXPECT_NE(text.find("requests 3/12"), std::string::npos);
  EXPECT_EQ(text.find("requests 2/12"), std::string::npos);
  EXPECT_EQ(text.find("requests 6/12"), std::string::npos);
  EXPECT_NE(text.find("requests 12/12"), std::string::npos);
}

}  // namespace
}  // namespace sparkglm::reports
