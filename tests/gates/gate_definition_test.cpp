#include "gates/gate_definition.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "gates/change_class_policy.h"
#include "tests/support/build_paths.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
const std::string kGates = sparkglm::testing::source_dir() + "/gates";

std::string error_of(const std::string& dir, const std::string& id) {
  try {
    load_gate(dir, id);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class GateFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gates-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
};

TEST(GateDefinition, EveryShippedGateLoads) {
  for (int g = 0; g <= 5; ++g) {
    const std::string id = "G" + std::to_string(g);
    const GateDefinition d = load_gate(kGates, id);
    EXPECT_EQ(d.id, id);
    EXPECT_FALSE(d.criteria.empty()) << id;
    EXPECT_EQ(d.sha256.size(), 64u);
  }
  EXPECT_EQ(load_gate(kGates, "G2").workloads,
            (std::vector<std::string>{"tinyglm-gate", "tinyglm-prefill-gate", "determinism"}));
  EXPECT_EQ(load_gate(kGates, "G3").needs, "gpu");
}

TEST(GateDefinition, ThresholdsAreData) {
  const GateDefinition g2 = load_gate(kGates, "G2");
  bool found = false;
  for (const Criterion& c : g2.criteria)
    if (c.metric == "output_throughput_tok_s") {
      EXPECT_EQ(c.check, "ratio_at_least");
      EXPECT_DOUBLE_EQ(c.factor, 0.95);
      found = true;
    }
  EXPECT_TRUE(found);
}

TEST(GateDefinition, UnknownGateIdIsRefused) {
  EXPECT_NE(error_of(kGates, "G7").find("--gate: expected one of G0..G5"), std::string::npos);
  EXPECT_EQ(gate_level("G4"), 4);
  EXPECT_THROW(gate_level("g4"), Error);
}

TEST_F(GateFiles, MalformedDefinitionsNameTheField) {
  write("G2.json", R"({"id": "G2", "title": "t", "runs_on": "x", "criteria": []})");
  EXPECT_NE(error_of(dir_.string(), "G2").find("G2.json.criteria: expected a non-empty array"),
            std::string::npos);
  write("G2.json", R"({"id": "G2", "title": "t", "runs_on": "x",
                       "criteria": [{"name": "n", "check": "vibes"}]})");
  EXPECT_NE(error_of(dir_.string(), "G2").find("criteria[0].check: unknown \"vibes\""),
            std::string::npos);
  write("G2.json", R"({"id": "G2", "title": "t", "runs_on": "x",
                       "criteria": [{"name": "n", "check": "ratio_at_least"}]})");
  EXPECT_NE(error_of(dir_.string(), "G2").find("criteria[0]: missing \"metric\""),
            std::string::npos);
  write("G2.json", R"({"id": "G3", "title": "t", "runs_on": "x",
                       "criteria": [{"name": "n", "check": "no_errors"}]})");
  EXPECT_NE(error_of(dir_.string(), "G2").find("G2.json.id: expected \"G2\""), std::string::npos);
  write("G2.json", "{not json");
  EXPECT_NE(error_of(dir_.string(), "G2").find("not valid JSON"), std::string::npos);
}

TEST(ChangeClassPolicy, ClassesAndOptionsAreData) {
  const ChangeClassPolicy p = ChangeClassPolicy::load(kGates);
  EXPECT_EQ(p.at("docs").required, std::vector<std::string>{"G0"});
  EXPECT_EQ(p.at("operator").required, (std::vector<std::string>{"G0", "G1", "G2"}));
  EXPECT_TRUE(p.at("operator").numerics_may_move);
  EXPECT_FALSE(p.at("launcher-profile").numerics_may_move);
  EXPECT_EQ(p.for_option("kv-cache-dtype").name, "quantization-speculation");
  EXPECT_EQ(p.for_option("max-num-seqs").name, "launcher-profile");  // the default class
  try {
    p.at("vibes");
    FAIL() << "an unknown class was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown change class \"vibes\" (known: docs"),
              std::string::npos);
  }
}

TEST_F(GateFiles, PolicyRejectsAnOptionMappedToNoClass) {
  write("change-classes.json", R"({"classes": {"docs": {"required": ["G0"],
      "to_change_default": ["G0"], "numerics_may_move": false}},
      "options": {"default": "docs", "block-size": "nope"}})");
  try {
    ChangeClassPolicy::load(dir_.string());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("options.block-size: expected the name of a class"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace sparkglm::gates
