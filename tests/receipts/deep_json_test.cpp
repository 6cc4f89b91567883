// Issue 14: arrays nested ~70,000 deep in a field of qualification.json made `verify`,
// `verify-all`, `report` and `sign` die of a stack overflow, so one committed bundle could take
// down verify-all and G0. The record is parsed under the receipt limits: a named problem, and the
// walk goes on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "receipts/bundle_verifier.h"
#include "receipts/results_index.h"

namespace sparkglm::receipts {
namespace {

namespace fs = std::filesystem;

class DeepRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) / ("deep_record_" + std::to_string(::getpid()));
    bundle_ = root_ / "results" / "2026-12-01-deep-record";
    fs::create_directories(bundle_);
    const std::string deep = std::string(70000, '[') + std::string(70000, ']');
    std::ofstream(bundle_ / "qualification.json")
        << R"({"schema": "sparkglm.qualification/1", "id": "2026-12-01-deep-record", "notes": )"
        << deep << "}";
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string text(const Problems& problems) {
    std::string t;
    for (const Problem& p : problems) t += p.to_string() + "\n";
    return t;
  }

  fs::path root_, bundle_;
};

TEST_F(DeepRecordTest, VerifyNamesTheDepthLimit) {
  const Problems problems = verify_bundle(bundle_);
  ASSERT_EQ(problems.size(), 1u) << text(problems);
  EXPECT_EQ(problems[0].where, "qualification.json");
  EXPECT_EQ(problems[0].what, "malformed: JSON nested deeper than 64 levels");
}

TEST_F(DeepRecordTest, VerifyAllReportsTheBundleAndGoesOn) {
  const std::string all = text(verify_all(root_));
  EXPECT_NE(all.find("JSON nested deeper than 64 levels"), std::string::npos) << all;
}

}  // namespace
}  // namespace sparkglm::receipts
