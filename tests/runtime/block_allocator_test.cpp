#include "engine/runtime/block_allocator.h"

#include <gtest/gtest.h>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

TEST(BlockAllocator, AllocatesGrowsAndReturnsEveryBlock) {
  BlockAllocator a(8);
  std::vector<int32_t> table;
  a.ensure_capacity(table, 33, 16);  // 33 tokens need 3 blocks of 16
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(a.num_free(), 5);
  a.ensure_capacity(table, 48, 16);
  EXPECT_EQ(table.size(), 3u);
  const int32_t shared = table[0];
  a.retain(shared);  // a second owner, as prefix sharing will do
  a.release_all(table);
  EXPECT_EQ(a.num_free(), 7);
  EXPECT_EQ(a.ref_count(shared), 1);
  a.release(shared);
  EXPECT_EQ(a.num_free(), 8);
}

TEST(BlockAllocator, RefusesMoreThanIsFreeAndSaysHowMuch) {
  BlockAllocator a(4);
  auto got = a.allocate(3);
  try {
    a.allocate(2);
    FAIL() << "expected a capacity error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCapacity);
    EXPECT_NE(std::string(e.what()).find("2 blocks requested, 1 free of 4"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(a.num_free(), 1);  // a refused request takes nothing
}

TEST(BlockAllocator, CachedBlocksWaitIdleAndAreEvictedLeastRecentlyReleasedFirst) {
  BlockAllocator a(4);
  std::vector<int32_t> evicted;
  a.set_evict_hook([&](int32_t b) { evicted.push_back(b); });
  std::vector<int32_t> t = a.allocate(3);
  for (int32_t b : t) a.mark_cached(b);
  a.release(t[1]);
  a.release(t[0]);
  a.release(t[2]);
  EXPECT_EQ(a.num_free(), 4) << "idle cached blocks count as free";
  EXPECT_EQ(a.num_idle_cached(), 3);
  a.acquire(t[0]);  // a hit takes one back: it leaves the idle list
  EXPECT_EQ(a.ref_count(t[0]), 1);
  EXPECT_EQ(a.num_free(), 3);
  const std::vector<int32_t> fresh = a.allocate(3);  // the plain free block first, then evictions
  EXPECT_EQ(evicted, (std::vector<int32_t>{t[1], t[2]})) << "released first, evicted first";
  EXPECT_EQ(a.evictions(), 2u);
  EXPECT_FALSE(a.cached(t[1]));
  EXPECT_TRUE(a.cached(t[0]));
  EXPECT_EQ(a.num_free(), 0);
  a.acquire(t[0]);  // a second sharer of a referenced cached block
  EXPECT_EQ(a.ref_count(t[0]), 2);
}

TEST(BlockAllocator, UncacheAllFreesIdleCachedBlocksWithoutTheHook) {
  BlockAllocator a(3);
  int hooked = 0;
  a.set_evict_hook([&](int32_t) { ++hooked; });
  std::vector<int32_t> t = a.allocate(2);
  for (int32_t b : t) a.mark_cached(b);
  a.release(t[0]);
  a.uncache_all();
  EXPECT_EQ(a.num_idle_cached(), 0);
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_FALSE(a.cached(t[1]));
  a.release(t[1]);  // no longer cached: plain free
  EXPECT_EQ(a.num_free(), 3);
  EXPECT_EQ(a.num_idle_cached(), 0);
  a.allocate(3);
  EXPECT_EQ(hooked, 0);
}

}  // namespace
}  // namespace sparkglm
