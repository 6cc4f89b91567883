// An A/B compares two arms of one model: check_arms_comparable refuses two models and accepts
// the same weights stored in another format (a --weight-format change).
#include "gates/serving_arm.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/error.h"

namespace sparkglm::gates {
namespace {

ServingArm arm(const std::string& preset, const std::string& weights) {
  ServingArm a;
  a.identity.identity = {
      {"model", {{"preset", preset}, {"config_sha256", "c"}, {"weights", weights}}}};
  return a;
}

std::vector<ServingArm> arms(ServingArm a, ServingArm b) {
  std::vector<ServingArm> v;
  v.push_back(std::move(a));
  v.push_back(std::move(b));
  return v;
}

TEST(ServingArm, WeightsCompareByTheirSourceNotTheirStoredFormat) {
  EXPECT_EQ(weights_source("dummy:seed=7,format=fp4-local"), "dummy:seed=7");
  EXPECT_EQ(weights_source("dummy:seed=7"), "dummy:seed=7");
  EXPECT_EQ(weights_source("dummy:seed=7,format=fp4-local,cut=8"), "dummy:seed=7,cut=8");
  EXPECT_NO_THROW(check_arms_comparable(
      arms(arm("tinyglm", "dummy:seed=7"), arm("tinyglm", "dummy:seed=7,format=fp4-local"))));
}

TEST(ServingArm, TwoModelsAreRefusedNamingBoth) {
  try {
    check_arms_comparable(
        arms(arm("tinyglm", "dummy:seed=7"), arm("tinyglm", "dummy:seed=8,format=fp4-local")));
    FAIL() << "two seeds were accepted as one model";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("different models"), std::string::npos) << what;
    EXPECT_NE(what.find("seed=8,format=fp4-local"), std::string::npos) << what;
  }
  EXPECT_THROW(check_arms_comparable(
                   arms(arm("tinyglm", "dummy:seed=7"), arm("tinyglm-micro", "dummy:seed=7"))),
               Error);
}

}  // namespace
}  // namespace sparkglm::gates
