// The prefix cache's disk tier file: refusals that name the directory and the numbers, a crash
// leftover cleared at start, nothing left in the directory while it runs, records read back as
// written, least recently used records replaced when a shelf is full; and the writer thread: a
// record read while its write is held pending, one put again while pending, a failed write, a
// store destroyed with writes pending.
#include "engine/runtime/prefix_store.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/error.h"
#include "tests/support/build_paths.h"

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
    std::string templ = sparkglm::testing::binary_dir() + "/prefix-store-test-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { fs::remove_all(dir_); }
  PrefixStoreOptions options(uint64_t capacity) const { return {dir_, capacity, 1000, 4000}; }
  int entries() const { return int(std::distance(fs::directory_iterator(dir_), {})); }
  static void fill(PrefixStore& s, int value) {
    std::fill_n(s.spill_buffer(), 4000, std::byte(value));
  }
  // Every byte of a record read back, or a message.
  static ::testing::AssertionResult holds(const std::byte* bytes, size_t n, int want) {
    if (!bytes) return ::testing::AssertionFailure() << "the record is absent";
    for (size_t i = 0; i < n; ++i)
      if (bytes[i] != std::byte(want))
        return ::testing::AssertionFailure()
               << "byte " << i << " is " << int(bytes[i]) << ", expected " << want;
    return ::testing::AssertionSuccess();
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
    store.put_block(1, {0, {1, 2, 3}});
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
    store.put_block(uint64_t(k), {uint64_t(k - 1), {k, k + 1}});
  }
  ASSERT_NE(store.read_block(3), nullptr);  // 3 is now the most recently used
  fill(store, 99);
  store.put_block(17, {16, {17}});  // replaces 1, the oldest
  EXPECT_EQ(store.block(1), nullptr);
  ASSERT_NE(store.block(3), nullptr);
  EXPECT_EQ(store.block(3)->parent, 2u);
  EXPECT_EQ(store.block(3)->tokens, (std::vector<int32_t>{3, 4}));
  for (int k : {3, 2, 17}) {
    std::fill_n(store.spill_buffer(), 4000, std::byte(0));  // a read must not see these
    EXPECT_TRUE(holds(store.read_block(uint64_t(k)), 1000, k == 17 ? 99 : k)) << "block " << k;
  }
  fill(store, 5);
  store.put_snapshot(40);
  fill(store, 6);
  store.put_snapshot(41);  // one slot: 40 goes
  EXPECT_FALSE(store.has_snapshot(40));
  EXPECT_EQ(store.read_snapshot(40), nullptr);
  EXPECT_TRUE(holds(store.read_snapshot(41), 4000, 6));
  EXPECT_EQ(store.reap(), 0);
  store.clear();
  EXPECT_EQ(store.blocks(), 0);
  EXPECT_EQ(store.snapshots(), 0);
  EXPECT_EQ(store.block(17), nullptr);
}

// The writer thread's gate: each write waits at it until the test lets it through, with the
// verdict the test gave (false: the write fails as an I/O error would).
class WriteGate {
 public:
  PrefixStoreWriter::Gate gate() {
    return [this] {
      std::unique_lock<std::mutex> lock(mutex_);
      const size_t n = entered_++;
      ++inside_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_ || verdicts_.size() > n; });
      --inside_;
      const bool ok = n < verdicts_.size() ? verdicts_[n] : true;
      changed_.notify_all();
      return ok;
    };
  }
  void let_through(bool ok = true) {
    const std::lock_guard<std::mutex> lock(mutex_);
    verdicts_.push_back(ok);
    changed_.notify_all();
  }
  void open() {  // every write from now on passes
    const std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  void wait_entered(size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return entered_ >= n; });
  }
  size_t entered() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return entered_;
  }
  int inside() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return inside_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> verdicts_;
  size_t entered_ = 0;
  int inside_ = 0;
  bool open_ = false;
};

// Puts a filler block through every staging buffer (their writes must pass the gate): a put takes
// a buffer only once its last write finished, and applies a failed one, so every write queued
// before is done and applied when this returns.
void cycle_buffers(PrefixStore& store, uint64_t first_key) {
  for (int i = 0; i < PrefixStore::kStagingBuffers; ++i) {
    std::fill_n(store.spill_buffer(), 4000, std::byte(200));
    store.put_block(first_key + uint64_t(i), {0, {}});
  }
}

TEST_F(PrefixStoreTest, ARecordReadWhileItsWriteIsPendingHasItsBytes) {
  WriteGate gate;
  PrefixStoreOptions o = options(1 << 20);
  o.write_gate = gate.gate();
  PrefixStore store(o);
  fill(store, 7);
  store.put_block(1, {0, {1}});
  fill(store, 8);
  store.put_snapshot(2);
  gate.wait_entered(1);  // the block's write is in progress, the snapshot's queued behind it
  EXPECT_TRUE(holds(store.read_block(1), 1000, 7));
  EXPECT_TRUE(holds(store.read_snapshot(2), 4000, 8));
  gate.open();
  cycle_buffers(store, 100);  // both buffers written again: the records come from the file now
  EXPECT_TRUE(holds(store.read_block(1), 1000, 7));
  EXPECT_TRUE(holds(store.read_snapshot(2), 4000, 8));
  EXPECT_EQ(store.reap(), 0);
}

TEST_F(PrefixStoreTest, ARecordPutAgainWhileItsWriteIsPendingReadsTheNewBytes) {
  WriteGate gate;
  PrefixStoreOptions o = options(1 << 20);
  o.write_gate = gate.gate();
  PrefixStore store(o);
  fill(store, 1);
  store.put_block(5, {0, {5}});
  fill(store, 2);
  store.put_block(5, {0, {5}});  // the same slot, queued behind the first write
  EXPECT_TRUE(holds(store.read_block(5), 1000, 2));
  for (int write = 0; write < 2 + PrefixStore::kStagingBuffers; ++write) gate.let_through();
  cycle_buffers(store, 100);
  EXPECT_TRUE(holds(store.read_block(5), 1000, 2)) << "the older write must not win";

  // Again, and the newer write fails: the record is absent, not the older bytes.
  fill(store, 3);
  store.put_block(6, {0, {6}});
  fill(store, 4);
  store.put_block(6, {0, {6}});
  EXPECT_TRUE(holds(store.read_block(6), 1000, 4));
  gate.let_through(true);   // 6, bytes 3
  gate.let_through(false);  // 6, bytes 4: fails
  gate.open();
  cycle_buffers(store, 200);
  EXPECT_EQ(store.reap(), 1);
  EXPECT_EQ(store.block(6), nullptr);
  EXPECT_EQ(store.read_block(6), nullptr);
  EXPECT_TRUE(holds(store.read_block(5), 1000, 2));
}

TEST_F(PrefixStoreTest, AFailedWriteIsAMissAndADiskError) {
  WriteGate gate;
  PrefixStoreOptions o = options(1 << 20);
  o.write_gate = gate.gate();
  PrefixStore store(o);
  fill(store, 9);
  store.put_snapshot(3);
  fill(store, 10);
  store.put_block(4, {0, {4}});
  gate.let_through(false);  // the snapshot's write fails
  gate.open();
  cycle_buffers(store, 100);
  EXPECT_FALSE(store.has_snapshot(3)) << "a record whose write failed is still offered";
  EXPECT_EQ(store.read_snapshot(3), nullptr);
  EXPECT_EQ(store.reap(), 1);
  EXPECT_EQ(store.reap(), 0) << "a failure is counted once";
  EXPECT_TRUE(holds(store.read_block(4), 1000, 10));
}

TEST_F(PrefixStoreTest, DestroyedWithWritesPendingItNeitherHangsNorLeavesAThread) {
  WriteGate gate;
  PrefixStoreOptions o = options(1 << 20);
  o.write_gate = gate.gate();
  auto store = std::make_unique<PrefixStore>(o);
  fill(*store, 1);
  store->put_block(1, {0, {1}});
  fill(*store, 2);
  store->put_block(2, {0, {2}});
  gate.wait_entered(1);  // one write in progress, one queued
  // The destructor waits for the write in progress: another thread lets it through, before or
  // while the store is destroyed.
  std::thread opener([&] { gate.open(); });
  store.reset();
  opener.join();
  EXPECT_EQ(gate.inside(), 0) << "a write still runs after its store is gone";
  EXPECT_LE(gate.entered(), 2u);
  EXPECT_EQ(entries(), 0) << "the tier's file outlived its store";

  // Destroyed at once with writes queued and none held: it returns too.
  store = std::make_unique<PrefixStore>(options(1 << 20));
  for (int k = 0; k < 8; ++k) {
    fill(*store, k);
    store->put_block(uint64_t(k), {0, {}});
  }
  store.reset();
  EXPECT_EQ(entries(), 0);
}

}  // namespace
}  // namespace sparkglm
