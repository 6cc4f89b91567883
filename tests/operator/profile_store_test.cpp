#include "operator/profile_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/core/error.h"

namespace sparkglm::operator_tool {
namespace {

namespace fs = std::filesystem;

class ProfileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sparkglm-store-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::vector<std::string> files(const fs::path& dir) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path root_;
};

const char* const kMicro = R"({
  "name": "micro", "description": "d", "model": "tinyglm-micro", "precision_mode": "strict",
  "limits": {"max_num_seqs": 2, "max_seq_len": 4096, "max_prefill_tokens": 256}
}
)";

// `profile show` and `diff` print what read_text_file reads: a profile claiming 8 GiB (sparse: no
// disk) or a FIFO is refused before it is read.
TEST_F(ProfileStoreTest, HugeOrNonRegularProfileTextIsRefusedBeforeItIsRead) {
  const fs::path huge = root_ / "huge.json";
  std::ofstream(huge) << "{}";
  fs::resize_file(huge, uintmax_t(8) << 30);
  try {
    read_text_file(huge.string());
    ADD_FAILURE() << "an 8 GiB profile was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), huge.string() +
                               ": 8589934592 bytes, larger than the limit of "
                               "16777216 bytes for this JSON file");
  }
  const fs::path fifo = root_ / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(read_text_file(fifo.string()), Error);
}

TEST_F(ProfileStoreTest, WritesANewFileAndKeepsABackupOfAReplacedOne) {
  const ProfileStore store((root_ / "profiles").string(), (root_ / "state").string());
  const ProfileStore::Written first = store.write("micro", "one\n");
  EXPECT_EQ(first.backup, "");
  EXPECT_EQ(read_text_file(first.path), "one\n");
  const ProfileStore::Written second = store.write("micro", "two\n");
  EXPECT_EQ(second.path, first.path);
  ASSERT_NE(second.backup, "");
  EXPECT_EQ(read_text_file(second.path), "two\n");
  EXPECT_EQ(read_text_file(second.backup), "one\n");
  const ProfileStore::Written third = store.write("micro", "three\n");
  EXPECT_NE(third.backup, second.backup);  // an earlier backup is never overwritten
  EXPECT_EQ(read_text_file(second.backup), "one\n");
  // No temporary file is left behind, and backups are not profiles.
  EXPECT_EQ(files(root_ / "profiles").size(), 3u);
  EXPECT_EQ(store.names(), std::vector<std::string>{"micro"});
}

// Twelve writers at once (separate processes, as twelve `recipe apply --yes` are): every version
// that was ever the file survives, as the file or as a backup, and no backup name is shared.
TEST_F(ProfileStoreTest, ConcurrentWritersKeepEveryVersionAsABackup) {
  const ProfileStore store((root_ / "profiles").string(), (root_ / "state").string());
  store.write("micro", "v0\n");
  constexpr int kWriters = 12;
  std::vector<pid_t> children;
  for (int i = 1; i <= kWriters; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        store.write("micro", "v" + std::to_string(i) + "\n");
        _exit(0);
      } catch (...) {
        _exit(1);
      }
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::set<std::string> versions;
  size_t backups = 0;
  for (const std::string& name : files(root_ / "profiles")) {
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".bak") == 0) ++backups;
    versions.insert(read_text_file((root_ / "profiles" / name).string()));
  }
  EXPECT_EQ(backups, size_t(kWriters));
  EXPECT_EQ(versions.size(), size_t(kWriters + 1));  // v0 .. v12, each exactly once
}

TEST_F(ProfileStoreTest, NamesCannotReachOutsideTheFolder) {
  const ProfileStore store((root_ / "profiles").string(), (root_ / "state").string());
  for (const char* name : {"../x", "a/b", "..", ".hidden", "", "UPPER", "/etc/passwd"})
    EXPECT_THROW(store.path_of(name), Error) << name;
  fs::create_directories(root_ / "profiles");
  fs::create_symlink(root_ / "elsewhere.json", root_ / "profiles" / "link.json");
  EXPECT_THROW(store.write("link", "x"), Error);
  EXPECT_FALSE(fs::exists(root_ / "elsewhere.json"));
}

TEST_F(ProfileStoreTest, UseRecordsAValidProfileOnly) {
  const ProfileStore store((root_ / "profiles").string(), (root_ / "state").string());
  EXPECT_EQ(store.used(), "");
  store.write("micro", kMicro);
  store.use("micro");
  EXPECT_EQ(store.used(), "micro");
  // The choice is state: private to its owner.
  EXPECT_EQ(fs::status(root_ / "state" / "profile").permissions(), fs::perms(0600));
  EXPECT_EQ(fs::status(root_ / "state").permissions(), fs::perms(0700));
  store.write("broken", "{}\n");
  EXPECT_THROW(store.use("broken"), Error);
  EXPECT_THROW(store.use("missing"), Error);
  EXPECT_EQ(store.used(), "micro");
}

TEST_F(ProfileStoreTest, ResolveListsTheAvailableNamesForAnUnknownOne) {
  const ProfileStore store((root_ / "profiles").string(), (root_ / "state").string());
  store.write("micro", kMicro);
  try {
    store.resolve("mikro");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("available: micro"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparkglm::operator_tool
