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

}  // namespace
}  // namespace sparkglm
