#pragma once
// A fresh folder under the system's temporary directory for one test, named by the prefix, the
// process and the running test, and removed with everything in it when the test ends.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace sparkglm::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix)
      : path(std::filesystem::temp_directory_path() /
             (prefix + "-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace sparkglm::testing
