#include "reports/text_card.h"

#include <gtest/gtest.h>

#include <sstream>

#include "engine/core/sha256.h"
#include "reports/metric_row.h"
#include "reports/text_table.h"
#include "tests/reports/fixture_bundles.h"

namespace sparkglm::reports {
namespace {

using testing::fixture;
using testing::kAbId;
using testing::kMeasurementId;
using testing::read_text;
using testing::ScratchBundle;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void expect_fits(const std::string& card) {
  for (const std::string& line : lines_of(card)) {
    EXPECT_LE(display_width(line), kCardWidth) << "line too wide: " << line;
    for (char c : line)
      EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "control char in: " << line;
  }
}

TEST(TextCard, MeasurementCardShowsHeaderSystemMetricsAndReceipt) {
  const BundleView bundle = load_bundle(fixture(kMeasurementId));
  const std::string card = render_text_card(bundle);
  expect_fits(card);
  const auto lines = lines_of(card);
  ASSERT_GT(lines.size(), 3u);
  EXPECT_EQ(lines[1].rfind("PASS  G2  G2 tinyGLM measurement", 0), 0u) << lines[1];
  for (const char* want :
       {kMeasurementId, "measurement", "fixture-host", "AMD EPYC 9654", "2 cores", "8.0 GiB",
        "gpus      none", "commit af5e772c0d1b (clean)", "profile none, model tinyglm-micro",
        "tinyglm-gate / decode_c1", "tinyglm-gate / mixed_c4", "aggregate_decode_tok_s",
        "decode_tok_s", "ttft_s", "wall_s", "deterministic across repetitions",
        "Synthetic fixture"})
    EXPECT_NE(card.find(want), std::string::npos) << "missing \"" << want << "\" in\n" << card;
  const std::string binary = bundle.record["change"]["candidate"]["binary_sha256"];
  EXPECT_NE(card.find("binary " + binary.substr(0, 12)), std::string::npos);
  // Each metric's median [min .. max] as the record states it.
  for (const MetricRow& row : metric_rows(bundle.record))
    EXPECT_NE(card.find(format_range(*row.candidate)), std::string::npos) << row.name;
  // The receipt hash is the sha256 of the exact bytes of qualification.json.
  const std::string hash = sha256_hex(read_text(fixture(kMeasurementId) / "qualification.json"));
  EXPECT_NE(lines.back().find(hash), std::string::npos) << lines.back();
  // A measurement has no baseline, so no A/B section.
  EXPECT_EQ(card.find("A/B:"), std::string::npos);
}

TEST(TextCard, AbCardShowsBaselineAndAbRows) {
  const BundleView bundle = load_bundle(fixture(kAbId));
  const std::string card = render_text_card(bundle);
  expect_fits(card);
  EXPECT_NE(card.find("A/B:"), std::string::npos);
  EXPECT_NE(card.find("kv_cache_dtype = fp8_g128"), std::string::npos);
  EXPECT_NE(card.find("baseline  commit"), std::string::npos);
  for (const MetricRow& row : metric_rows(bundle.record)) {
    ASSERT_TRUE(row.baseline && row.change_pct && row.p) << row.name;
    EXPECT_NE(card.find(format_range(*row.baseline)), std::string::npos) << row.name;
    EXPECT_NE(card.find(format_change_pct(row.change_pct)), std::string::npos) << row.name;
    EXPECT_NE(card.find(format_ci(row.ci_lo, row.ci_hi)), std::string::npos) << row.name;
  }
  EXPECT_NE(card.find("better"), std::string::npos);
  EXPECT_NE(card.find("worse"), std::string::npos);
}

TEST(TextCard, FailedGateMakesTheHeaderFail) {
  ScratchBundle copy(kMeasurementId, "card-fail");
  copy.edit("qualification.json", [](nlohmann::json& j) { j["gates"][1]["status"] = "fail"; });
  const auto lines = lines_of(render_text_card(copy.load()));
  EXPECT_EQ(lines[1].rfind("FAIL", 0), 0u) << lines[1];
  copy.edit("qualification.json", [](nlohmann::json& j) { j["gates"][1]["status"] = "not-run"; });
  EXPECT_EQ(lines_of(render_text_card(copy.load()))[1].rfind("INCOMPLETE", 0), 0u);
}

TEST(TextCard, LongAndHostileTextStaysWithinTheWidth) {
  ScratchBundle copy(kAbId, "card-long");
  copy.edit("qualification.json", [](nlohmann::json& j) {
    j["title"] = std::string(300, 'T') + "\x1b[2J\r\nend";
    j["target"] =
        "a claim " + std::string(250, 'x') + " with ünïcödé words repeated " + std::string(40, 'y');
    j["limitations"].push_back(std::string(20, 'w') + "\nsecond line\tand a tab");
    j["metrics"][0]["name"] = std::string(120, 'm');
  });
  const std::string card = render_text_card(copy.load());
  expect_fits(card);
  EXPECT_EQ(card.find('\x1b'), std::string::npos);
  EXPECT_NE(card.find("ünïcödé"), std::string::npos);
}

TEST(TextTable, WrapsAndCutsByColumnsNotBytes) {
  EXPECT_EQ(display_width("ünï"), 3u);
  EXPECT_EQ(fit_width("abcdef", 4), "abc~");
  EXPECT_EQ(fit_width("ünïcödé", 4), "ünï~");
  const auto wrapped = wrap_words("one two three " + std::string(12, 'z'), 8);
  ASSERT_EQ(wrapped.size(), 4u);
  EXPECT_EQ(wrapped[0], "one two");
  EXPECT_EQ(wrapped[1], "three");
  EXPECT_EQ(wrapped[2], "zzzzzzzz");
  EXPECT_EQ(wrapped[3], "zzzz");
  const auto table = table_lines({{"a", "bb"}, {"ccc", "d"}}, {}, 2);
  EXPECT_EQ(table[0], "  a    bb");
  EXPECT_EQ(table[1], "  ccc  d");
}

}  // namespace
}  // namespace sparkglm::reports
