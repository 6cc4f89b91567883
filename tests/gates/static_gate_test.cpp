// G0's unit-test criterion reads the last ctest run alone: failures, timeouts and tests that could
// not start count; skipped tests and what a test printed do not; a LastTestsFailed.log that an
// earlier run left behind is not believed.
#include "gates/static_gate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;

std::string section(int n, const std::string& name, const std::string& command,
                    const std::string& output, const std::string& result) {
  return std::to_string(n) + "/4 Testing: " + name + "\n" + std::to_string(n) + "/4 Test: " + name +
         "\nCommand: " + command + "\nDirectory: /b\n\"" + name +
         "\" start time: Dec 02 11:48 UTC\n" +
         "Output:\n----------------------------------------------------------\n" + output +
         "<end of output>\nTest time =   0.01 sec\n"
         "----------------------------------------------------------\n" +
         result + "\n\"" + name + "\" end time: Dec 02 11:48 UTC\n";
}

GateResult judge(const fs::path& ctest_dir) {
  GateDefinition g0;
  g0.id = "G0";
  g0.criteria.push_back({"unit tests passed", "ctest", "", "", "", 1, 0, ""});
  StaticGateInputs in;
  in.ctest_dir = ctest_dir;
  return evaluate_static_gate(g0, in);
}

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

TEST(StaticGate, TheUnitTestCriterionReadsTheLastRunAlone) {
  testing::TempDir t("static-gate");
  const fs::path tmp = t.path / "Testing" / "Temporary";
  // An earlier run failed two tests and left its list behind.
  write(tmp / "LastTestsFailed.log", "2:B.Fails\n3:C.TimesOut\n");
  const std::string passing =
      "Start testing: Dec 02 11:48 UTC\n"
      "----------------------------------------------------------\n" +
      section(1, "A.Passes", "\"/b/t\"", "Test Failed.\n1/4 Testing: Printed.Line\n",
              "Test Passed.") +
      section(2, "B.Fails", "\"/b/t\"", "", "Test Passed.") +
      section(3, "C.TimesOut", "\"/b/t\"", "", "Test Passed.") +
      section(4, "D.Skipped", "\"/b/t\"", "[  SKIPPED ]\n",
              "Test Pass Reason:\nSkip regular expression found in output.") +
      "End testing: Dec 02 11:49 UTC\n";
  write(tmp / "LastTest.log", passing);
  GateResult r = judge(t.path);
  ASSERT_EQ(r.criteria.size(), 1u);
  EXPECT_TRUE(r.criteria[0].pass) << r.criteria[0].note;
  EXPECT_EQ(r.criteria[0].observed, 0);

  const std::string failing =
      "Start testing: Dec 02 11:50 UTC\n" + section(1, "A.Passes", "\"/b/t\"", "", "Test Passed.") +
      section(2, "B.Fails", "\"/b/t\"", "", "Test Failed.") +
      section(3, "C.TimesOut", "\"/b/t\"", "", "Test Failed.\nTest Fail Reason:\nTimeout") +
      section(4, "E.CannotStart", "\"\"", "", "Test Passed.") + "End testing: Dec 02 11:51 UTC\n";
  write(tmp / "LastTest.log", failing);
  r = judge(t.path);
  EXPECT_FALSE(r.criteria[0].pass);
  EXPECT_EQ(r.criteria[0].observed, 3);
  EXPECT_EQ(r.criteria[0].note, "failed: B.Fails, C.TimesOut, E.CannotStart");

  fs::remove(tmp / "LastTest.log");
  r = judge(t.path);
  EXPECT_FALSE(r.criteria[0].pass);
  EXPECT_EQ(r.criteria[0].observed, "no ctest run found");
}

}  // namespace
}  // namespace sparkglm::gates
