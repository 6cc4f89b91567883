#include "engine/options/api_key_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;

std::string message_of(const ApiKeySource& source) {
  try {
    resolve_api_key(source);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ApiKeySource, EachOfTheThreeSourcesGivesTheKey) {
  EXPECT_EQ(resolve_api_key({}), "");
  EXPECT_EQ(resolve_api_key({"k-inline", "", ""}), "k-inline");
  const fs::path file = fs::temp_directory_path() / ("sparkglm-key-" + std::to_string(getpid()));
  std::ofstream(file) << "k-from-file\n";
  EXPECT_EQ(resolve_api_key({"", file.string(), ""}), "k-from-file");
  fs::remove(file);
  setenv("SPARKGLM_TEST_KEY_VAR", "k-from-env", 1);
  EXPECT_EQ(resolve_api_key({"", "", "SPARKGLM_TEST_KEY_VAR"}), "k-from-env");
  unsetenv("SPARKGLM_TEST_KEY_VAR");
}

TEST(ApiKeySource, ErrorsNameTheFlag) {
  EXPECT_NE(message_of({"a", "/f", ""}).find("give one of --api-key"), std::string::npos);
  EXPECT_NE(message_of({"", "/nonexistent/key", ""}).find("--api-key-file /nonexistent/key"),
            std::string::npos);
  unsetenv("SPARKGLM_TEST_UNSET_VAR");
  EXPECT_NE(message_of({"", "", "SPARKGLM_TEST_UNSET_VAR"}).find("is not set"), std::string::npos);
  EXPECT_NE(message_of({"", "", "BAD-NAME"}).find("--api-key-env"), std::string::npos);
  EXPECT_NE(message_of({"has space", "", ""}).find("printable"), std::string::npos);
  const fs::path file = fs::temp_directory_path() / ("sparkglm-key2-" + std::to_string(getpid()));
  std::ofstream(file) << "\n";
  EXPECT_NE(message_of({"", file.string(), ""}).find("is empty"), std::string::npos);
  fs::remove(file);
}

}  // namespace
}  // namespace sparkglm
