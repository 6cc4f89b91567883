// The prefix cache's disk tier file: refusals that name the directory and the numbers, a crash
// leftover cleared at start, nothing left in the directory while it runs, records read back as
// written, least recently used records replaced when a shelf is full.
#include "engine/runtime/prefix_store.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;

std::string error_of(const PrefixStoreOptions& o) {
  try {
    PrefixStore store(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class PrefixStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The build directory: a disk where the tests run (a tmpfs /tmp would be refused).
    std::string templ = std::string(SPARKGLM_BINARY_DIR) + "/prefix-store-test-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { fs::remove_all(dir_); }
  PrefixStoreOptions options(uint64_t capacity) const { return {dir_, capacity, 1000, 4000}; }
  int entries() const { return int(std::distance(fs::directory_iterator(dir_), {})); }
  static void fill(PrefixStore& s, int value) {
    std::fill_n(s.staging(), PrefixStore::staging_bytes(1000, 4000), std::byte(value));
  }
  std::string dir_;
};

TEST_F(PrefixStoreTest, RefusalsNameTheDirectoryAndTheNumbers) {
  EXPECT_NE(error_of({dir_ + "/missing", 1 << 20, 1000, 4000})
                .find("--prefix-cache-dir " + dir_ + "/missing: not a directory"),
            std::string::npos);
  const std::string small = error_of(options(4999));
  EXPECT_NE(small.find("--prefix-cache-dir " + dir_), std::string::npos) << small;
  EXPECT_NE(small.find("holds not one KDA snapshot (4000 bytes) and one block (1000 bytes)"),
            std::string::npos)
      << small;
  const std::string full = error_of(options(uint64_t(1) << 60));
  EXPECT_NE(full.find(" free, --prefix-cache-gb asks for 1073741824.00 GiB"), std::string::npos)
      << full;
  struct statfs shm {};
  if (::statfs("/dev/shm", &shm) == 0 && uint64_t(shm.f_type) == uint64_t(TMPFS_MAGIC)) {
    const std::string tmpfs = error_of({"/dev/shm", 1 << 20, 1000, 4000});
    EXPECT_NE(tmpfs.find("--prefix-cache-dir /dev/shm: is on a tmpfs"), std::string::npos) << tmpfs;
  }
}

TEST_F(PrefixStoreTest, ClearsACrashLeftoverAndLeavesNoFileBehind) {
  std::ofstream(dir_ + "/sparkglm-prefix-cache.4242.tmp") << "left by a crash";
  std::ofstream(dir_ + "/notes.txt") << "not ours";
  {
    PrefixStore store(options(1 << 20));
    fill(store, 7);
    ASSERT_TRUE(store.put_block(1, {0, {1, 2, 3}}));
    EXPECT_FALSE(fs::exists(dir_ + "/sparkglm-prefix-cache.4242.tmp"));
    EXPECT_TRUE(fs::exists(dir_ + "/notes.txt")) << "a file the store did not make was removed";
    EXPECT_EQ(entries(), 1) << "the tier's file must be unlinked while it is open";
  }
  EXPECT_EQ(entries(), 1);
}

TEST_F(PrefixStoreTest, RecordsComeBackAsWrittenAndTheOldestMakesRoom) {
  // 20000 bytes: one snapshot slot (a quarter, at least one), then 16 block slots of 1000.
  PrefixStore store(options(20000));
  EXPECT_NE(store.summary().find("16 block slots of 1000 bytes, 1 snapshot slots of 4000 bytes"),
            std::string::npos)
      << store.summary();
  for (int k = 1; k <= 16; ++k) {
    fill(store, k);
    ASSERT_TRUE(store.put_block(uint64_t(k), {uint64_t(k - 1), {k, k + 1}}));
  }
  ASSERT_TRUE(store.read_block(3));  // 3 is now the most recently used
  fill(store, 99);
  ASSERT_TRUE(store.put_block(17, {16, {17}}));  // replaces 1, the oldest
  EXPECT_EQ(store.block(1), nullptr);
  ASSERT_NE(store.block(3), nullptr);
  EXPECT_EQ(store.block(3)->parent, 2u);
  EXPECT_EQ(store.block(3)->tokens, (std::vector<int32_t>{3, 4}));
  for (int k : {3, 2, 17}) {
    fill(store, 0);
    ASSERT_TRUE(store.read_block(uint64_t(k)));
    const int want = k == 17 ? 99 : k;
    for (size_t i = 0; i < 1000; ++i)
      ASSERT_EQ(store.staging()[i], std::byte(want)) << "block " << k << " byte " << i;
  }
  fill(store, 5);
  ASSERT_TRUE(store.put_snapshot(40));
  fill(store, 6);
  ASSERT_TRUE(store.put_snapshot(41));  // one slot: 40 goes
  EXPECT_FALSE(store.has_snapshot(40));
  ASSERT_TRUE(store.read_snapshot(41));
  EXPECT_EQ(store.staging()[3999], std::byte(6));
  store.clear();
  EXPECT_EQ(store.blocks(), 0);
  EXPECT_EQ(store.snapshots(), 0);
  EXPECT_EQ(store.block(17), nullptr);
}

}  // namespace
}  // namespace sparkglm
