#include "reports/bundle_comparison.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>

#include "engine/core/error.h"
#include "reports/report_commands.h"
#include "tests/reports/fixture_bundles.h"

namespace sparkglm::reports {
namespace {

using testing::fixture;
using testing::kAbId;
using testing::kMeasurementId;
using testing::ScratchBundle;

// The refusal message for A = the A/B fixture and B = the measurement edited by `edit`.
std::string refusal(const std::string& tag, const std::function<void(const ScratchBundle&)>& edit) {
  ScratchBundle b(kMeasurementId, tag);
  edit(b);
  try {
    render_comparison(load_bundle(fixture(kAbId)), b.load());
  } catch (const Error& e) {
    return e.message();
  }
  ADD_FAILURE() << tag << ": compared although the settings differ";
  return "";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void edit_record(const ScratchBundle& b, const std::function<void(nlohmann::json&)>& f) {
  b.edit("qualification.json", f);
}

TEST(BundleComparison, AcceptsBundlesThatDifferOnlyInTheOptionUnderTest) {
  // A: candidate fp8_g128 KV (the option under test); B: bf16. Everything else matches.
  const BundleView a = load_bundle(fixture(kAbId)), b = load_bundle(fixture(kMeasurementId));
  EXPECT_TRUE(settings_differences(a, b).empty());
  const std::string md = render_comparison(a, b);
  EXPECT_NE(md.find("| case | metric | unit | A median [min .. max] | B median [min .. max] | "
                    "change | 95% CI | p | verdict |"),
            std::string::npos)
      << md;
  for (const char* metric : {"aggregate_decode_tok_s", "wall_s", "ttft_s", "decode_tok_s"})
    EXPECT_EQ(count(md, "| " + std::string(metric) + " |"), 2u) << metric;  // two cases each
  EXPECT_NE(md.find(kAbId), std::string::npos);
  EXPECT_NE(md.find(kMeasurementId), std::string::npos);
  EXPECT_NE(md.find("kv_cache_dtype"), std::string::npos);
  EXPECT_EQ(md.find("only in"), std::string::npos);
}

TEST(BundleComparison, ABundleComparedWithItselfIsNeutralEverywhere) {
  const BundleView a = load_bundle(fixture(kMeasurementId));
  const std::string md = render_comparison(a, a);
  EXPECT_EQ(md.find("| better |"), std::string::npos);
  EXPECT_EQ(md.find("| worse |"), std::string::npos);
  EXPECT_NE(md.find("| +0.0% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| neutral-noisy |"), std::string::npos);
}

TEST(BundleComparison, RefusesADifferentModelNamingTheField) {
  const std::string m = refusal("model", [](const ScratchBundle& b) {
    edit_record(b, [](nlohmann::json& j) {
      j["change"]["candidate"]["model"]["weights"] = "dummy-seed:1";
    });
  });
  EXPECT_NE(m.find("change.candidate.model.weights: A \"dummy-seed:0\", B \"dummy-seed:1\""),
            std::string::npos)
      << m;
}

TEST(BundleComparison, RefusesADifferentPrecisionKvBudgetOrDtypeNotUnderTest) {
  const std::string precision = refusal("precision", [](const ScratchBundle& b) {
    b.edit("server/candidate/effective-config.json",
           [](nlohmann::json& j) { j["precision-mode"] = "spark"; });
  });
  EXPECT_NE(
      precision.find(
          "server/candidate/effective-config.json: precision-mode: A \"strict\", B \"spark\""),
      std::string::npos)
      << precision;
  const std::string budget = refusal("budget", [](const ScratchBundle& b) {
    b.edit("server/candidate/effective-config.json",
           [](nlohmann::json& j) { j["kv-cache-memory-bytes"] = 1 << 20; });
  });
  EXPECT_NE(budget.find("kv-cache-memory-bytes: A 67108864, B 1048576"), std::string::npos)
      << budget;
  // Between two bundles that test no option, the KV dtype is a setting like any other.
  ScratchBundle b(kMeasurementId, "dtype");
  b.edit("server/candidate/effective-config.json",
         [](nlohmann::json& j) { j["kv-cache-dtype"] = "fp8_g128"; });
  const auto differences = settings_differences(load_bundle(fixture(kMeasurementId)), b.load());
  ASSERT_EQ(differences.size(), 1u);
  EXPECT_EQ(differences[0].field, "server/candidate/effective-config.json: kv-cache-dtype");
  EXPECT_EQ(differences[0].a, "\"bf16\"");
  EXPECT_EQ(differences[0].b, "\"fp8_g128\"");
}

TEST(BundleComparison, IgnoresWhereTheServerListened) {
  ScratchBundle b(kMeasurementId, "port");
  b.edit("server/candidate/effective-config.json", [](nlohmann::json& j) { j["port"] = 1234; });
  EXPECT_TRUE(settings_differences(load_bundle(fixture(kAbId)), b.load()).empty());
}

TEST(BundleComparison, RefusesADifferentProfileOrOptionUnderTest) {
  const std::string profile = refusal("profile", [](const ScratchBundle& b) {
    edit_record(b, [](nlohmann::json& j) { j["change"]["candidate"]["profile"] = "4x1m"; });
  });
  EXPECT_NE(profile.find("change.candidate.profile: A \"\", B \"4x1m\""), std::string::npos)
      << profile;
  const std::string option = refusal("option", [](const ScratchBundle& b) {
    edit_record(b, [](nlohmann::json& j) {
      j["change"]["option"] = {{"name", "block_size"}, {"value", 32}};
    });
  });
  EXPECT_NE(option.find("change.option.name: A \"kv_cache_dtype\", B \"block_size\""),
            std::string::npos)
      << option;
}

TEST(BundleComparison, RefusesDifferentWorkloadSpecsNamingTheFieldInside) {
  // Arrival, sampling and warmups live in the spec; its hash changes with it.
  const struct {
    const char* tag;
    std::function<void(nlohmann::json&)> edit;
    const char* field;
  } cases[] = {
      {"arrival", [](nlohmann::json& s) { s["cases"][1]["arrival"]["offset_s"] = 0.5; },
       "workloads/tinyglm-gate.json: cases[1].arrival.offset_s: A 0.25, B 0.5"},
      {"sampling", [](nlohmann::json& s) { s["sampling"]["temperature"] = 0.7; },
       "workloads/tinyglm-gate.json: sampling.temperature: A 0.0, B 0.7"},
      {"warmups", [](nlohmann::json& s) { s["warmups"] = 2; },
       "workloads/tinyglm-gate.json: warmups: A 1, B 2"},
      {"prompts", [](nlohmann::json& s) { s["prompt_builder"]["seed"] = 8; },
       "workloads/tinyglm-gate.json: prompt_builder.seed: A 7, B 8"},
  };
  for (const auto& c : cases) {
    const std::string m = refusal(c.tag, [&](const ScratchBundle& b) {
      b.edit("workloads/tinyglm-gate.json", c.edit);
      edit_record(
          b, [](nlohmann::json& j) { j["workloads"][0]["spec_sha256"] = std::string(64, 'e'); });
    });
    EXPECT_NE(m.find(c.field), std::string::npos) << c.tag << ": " << m;
  }
  // Without the spec files, the hash itself is named.
  const std::string sha = refusal("sha", [](const ScratchBundle& b) {
    std::filesystem::remove(b.dir() / "workloads" / "tinyglm-gate.json");
    edit_record(b,
                [](nlohmann::json& j) { j["workloads"][0]["spec_sha256"] = std::string(64, 'e'); });
  });
  EXPECT_NE(sha.find("workloads[id=tinyglm-gate].spec_sha256"), std::string::npos) << sha;
}

TEST(BundleComparison, RefusesADifferentScaleOrWorkloadSet) {
  const std::string scale = refusal("scale", [](const ScratchBundle& b) {
    edit_record(b, [](nlohmann::json& j) { j["workloads"][0]["scale"] = 1.0; });
  });
  EXPECT_NE(scale.find("workloads[id=tinyglm-gate].scale: A 0.05, B 1.0"), std::string::npos)
      << scale;
  const std::string set = refusal("set", [](const ScratchBundle& b) {
    edit_record(b, [](nlohmann::json& j) { j["workloads"][0]["id"] = "other"; });
  });
  EXPECT_NE(set.find("workloads[id=other]: A (absent)"), std::string::npos) << set;
  EXPECT_NE(set.find("workloads[id=tinyglm-gate]: A {"), std::string::npos) << set;
}

TEST(BundleComparison, RefusesDifferentWarmupsAsRun) {
  const std::string m = refusal("warmups-run", [](const ScratchBundle& b) {
    std::istringstream in(testing::read_text(b.dir() / "requests.jsonl"));
    std::string kept;
    for (std::string line; std::getline(in, line);)
      if (line.find("\"case_id\":\"decode_c1\"") == std::string::npos ||
          line.find("\"repetition\":-1") == std::string::npos)
        kept += line + "\n";
    testing::write_text(b.dir() / "requests.jsonl", kept);
  });
  EXPECT_NE(m.find("requests.jsonl: warmup requests of case tinyglm-gate / decode_c1: A 1, B 0"),
            std::string::npos)
      << m;
}

TEST(CompareCommand, ExitCodesAndOutput) {
  std::ostringstream out, err;
  EXPECT_EQ(compare_command({fixture(kAbId).string(), fixture(kMeasurementId).string()}, out, err),
            0)
      << err.str();
  EXPECT_NE(out.str().find("| decode_tok_s |"), std::string::npos);

  ScratchBundle b(kMeasurementId, "cmd");
  b.edit("server/candidate/effective-config.json",
         [](nlohmann::json& j) { j["precision-mode"] = "spark"; });
  std::ostringstream out2, err2;
  EXPECT_EQ(compare_command({fixture(kAbId).string(), b.dir().string()}, out2, err2), 1);
  EXPECT_TRUE(out2.str().empty());
  EXPECT_NE(err2.str().find("precision-mode"), std::string::npos) << err2.str();

  std::ostringstream out3, err3;
  EXPECT_EQ(compare_command({fixture(kAbId).string()}, out3, err3), 2);
  EXPECT_NE(err3.str().find("expected two bundle folders"), std::string::npos);

  // --out writes the same table.
  const auto file = b.root() / "compare.md";
  std::ostringstream out4, err4;
  EXPECT_EQ(compare_command(
                {fixture(kAbId).string(), fixture(kMeasurementId).string(), "--out", file.string()},
                out4, err4),
            0)
      << err4.str();
  EXPECT_EQ(testing::read_text(file), out4.str());
}

}  // namespace
}  // namespace sparkglm::reports
