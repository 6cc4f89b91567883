#include "operator/recipe.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "tests/support/build_paths.h"

namespace sparkglm::operator_tool {
namespace {

using nlohmann::json;

json fixture(const std::string& name) {
  std::ifstream in(sparkglm::testing::test_data_dir() + "/recipes/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

const char* const kSeed = "glm-5-3-flash-nvfp4-on-2x-dgx-spark-atlas-rc4-2-tp2-dflash2-1m.json";

TEST(Recipe, ReadsTheSeedRecipesFields) {
  const Recipe r = parse_recipe(fixture(kSeed), "seed");
  EXPECT_EQ(r.id, "glm-5-3-flash-nvfp4-on-2x-dgx-spark-atlas-rc4-2-tp2-dflash2-1m");
  EXPECT_EQ(r.command_field, "inference.command");
  ASSERT_GE(r.command.size(), 3u);
  EXPECT_EQ(r.command[0], "serve");
  EXPECT_EQ(r.command[1], "/models/atlas-overlay");
  EXPECT_EQ(r.command.back(), "--mtp-gate=force");
  EXPECT_EQ(r.env_field, "inference.env");
  EXPECT_EQ(r.env.form, "prose");
  EXPECT_EQ(r.model_repo, "nvidia/GLM-5.3-Flash-NVFP4");
  EXPECT_EQ(r.model_revision, "423acf37583782c51c142d145aef733d72943d93");
  EXPECT_EQ(r.quantization, "NVFP4");
  EXPECT_EQ(r.context_length, 1048576);
  EXPECT_EQ(r.concurrency, 4);
  EXPECT_EQ(r.hardware["nodes"], 2);
  EXPECT_EQ(r.engine["name"], "atlas");
  EXPECT_EQ(r.published_at, "https://github.com/Enntity/sparkglm/tree/3c7d671");
  EXPECT_TRUE(r.unread_fields.empty()) << r.unread_fields.front();
}

TEST(Recipe, ReadsTheVariantsOtherFieldNames) {
  const Recipe r = parse_recipe(fixture("variant-8x128k.json"), "variant");
  EXPECT_EQ(r.id, "glm-5-3-flash-tp2-8x128k-variant");
  EXPECT_EQ(r.title, "GLM-5.3-Flash on 2x DGX Spark, eight 128K slots");
  EXPECT_EQ(r.command_field, "serve_command");
  EXPECT_EQ(r.command.size(), 14u);
  EXPECT_EQ(r.env.form, "object");
  EXPECT_EQ(r.env.assignments.size(), 4u);
  EXPECT_EQ(r.model_repo, "nvidia/GLM-5.3-Flash-FP4-Local");
  EXPECT_EQ(r.quantization, "FP4-Local");
  EXPECT_EQ(r.context_length, 131072);
  EXPECT_FALSE(r.concurrency.has_value());
}

TEST(Recipe, AMissingCommandNamesTheFieldsLookedFor) {
  json j = fixture("variant-8x128k.json");
  j.erase("serve_command");
  try {
    parse_recipe(j, "r.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("no serve command"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("serve_command"), std::string::npos) << e.what();
  }
}

TEST(Recipe, AMalformedCommandIsAnErrorNamingTheField) {
  EXPECT_THROW(parse_recipe(json{{"command", 5}}, "r"), Error);
  EXPECT_THROW(parse_recipe(json{{"command", json::array({"serve", 1})}}, "r"), Error);
  EXPECT_THROW(parse_recipe(json{{"command", ""}}, "r"), Error);
  EXPECT_THROW(parse_recipe(json::array(), "r"), Error);
}

TEST(Recipe, AShellCommandWithOperatorsIsRefusedNotRun) {
  try {
    parse_recipe(json{{"command", "serve --port 1; touch /tmp/sparkglm-pwned"}}, "r");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("';'"), std::string::npos) << e.what();
  }
}

TEST(Recipe, AcceptsCountsWrittenWithUnitsAndListsUnreadFields) {
  const Recipe r = parse_recipe(
      json{{"cmd", "serve"}, {"context_length", "128K"}, {"concurrency", 8}, {"color", "red"}},
      "r");
  EXPECT_EQ(r.context_length, 131072);
  EXPECT_EQ(r.concurrency, 8);
  ASSERT_EQ(r.unread_fields.size(), 1u);
  EXPECT_EQ(r.unread_fields[0], "color");
  EXPECT_THROW(parse_recipe(json{{"cmd", "serve"}, {"context", "lots"}}, "r"), Error);
}

// 2^64 - 1 read as int64_t is -1, and "8796093022208M" is 2^63: neither may wrap into a count.
TEST(Recipe, CountsThatAreNegativeOrWrapAreRefusedNamingTheField) {
  for (const json& bad : {json(-5), json(18446744073709551615ull), json("8796093022208M"),
                          json("-128K"), json("9223372036854775807"), json(1.5)}) {
    SCOPED_TRACE(bad.dump());
    try {
      parse_recipe(json{{"cmd", "serve"}, {"context_length", bad}}, "r");
      ADD_FAILURE() << "accepted context_length " << bad.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig);
      EXPECT_EQ(e.message(),
                "r: context_length: expected a whole number from 0 to 2^40, got " + bad.dump());
    }
  }
  EXPECT_EQ(parse_recipe(json{{"cmd", "serve"}, {"concurrency", "1M"}}, "r").concurrency, 1048576);
}

}  // namespace
}  // namespace sparkglm::operator_tool
