#include "operator/state_folder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"

namespace sparkglm::operator_tool {
namespace {

namespace fs = std::filesystem;

class StateFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sparkglm-statefolder-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(StateFolderTest, TheFolderIs0700AndItsFiles0600WhateverTheUmask) {
  const mode_t old = umask(0);  // the widest umask: the modes must not come from it
  const StateFolder state((root_ / "state").string());
  state.write("engine.json", "{}\n");
  const int fd = state.open_append("engine.log");
  close(fd);
  umask(old);
  EXPECT_EQ(fs::status(root_ / "state").permissions(), fs::perms(0700));
  EXPECT_EQ(fs::status(root_ / "state" / "engine.json").permissions(), fs::perms(0600));
  EXPECT_EQ(fs::status(root_ / "state" / "engine.log").permissions(), fs::perms(0600));
  EXPECT_EQ(state.read("engine.json").value_or(""), "{}\n");
  EXPECT_FALSE(state.read("missing").has_value());
}

TEST_F(StateFolderTest, AnOlderWiderFolderAndLogAreTightened) {
  fs::create_directories(root_ / "state");
  fs::permissions(root_ / "state", fs::perms(0755));
  std::ofstream(root_ / "state" / "engine.log") << "old\n";
  fs::permissions(root_ / "state" / "engine.log", fs::perms(0644));
  const StateFolder state((root_ / "state").string());
  close(state.open_append("engine.log"));
  EXPECT_EQ(fs::status(root_ / "state").permissions(), fs::perms(0700));
  EXPECT_EQ(fs::status(root_ / "state" / "engine.log").permissions(), fs::perms(0600));
}

TEST_F(StateFolderTest, LinksAreRefusedNotFollowed) {
  std::ofstream(root_ / "target") << "secret\n";
  fs::create_directories(root_ / "real");
  fs::create_directory_symlink(root_ / "real", root_ / "linked");
  EXPECT_THROW(StateFolder((root_ / "linked").string()).prepare(), Error);
  const StateFolder state((root_ / "real").string());
  fs::create_symlink(root_ / "target", root_ / "real" / "engine.pid");
  EXPECT_THROW(state.read("engine.pid"), Error);
  EXPECT_THROW(state.open_append("engine.pid"), Error);
}

}  // namespace
}  // namespace sparkglm::operator_tool
