// The CUDA runner's step order and packed words (engine/backend/step_layout.h), on the host: dense
// decode rows first, then decode rows the indexer selects for, then prefill chunks; page rows from
// the block tables; logit rows and batch rows mapped both ways; capacity errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/backend/step_layout.h"
#include "engine/core/error.h"

namespace sparkglm {
namespace {

constexpr int kBlock = 16, kTopkPools = 512, kPool = 4;

StepLayout layout(int max_rows = 64, int max_seqs = 4, int stride = 256) {
  return StepLayout({max_rows, max_seqs, stride}, kBlock, kTopkPools, kPool);
}

std::vector<int32_t> blocks(int first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + 3 * i);  // scattered physical blocks
  return t;
}

TEST(StepLayout, DecodeRowsComeFirstDenseBeforeSparseThenPrefillChunks) {
  ForwardBatch b;
  b.add_sequence({7, 8, 9}, 32, 2, blocks(100, 3));  // prefill chunk at 32..34 (slot 2)
  b.add_sequence({5}, 3000, 1, blocks(200, 188));    // decode at 3000: sparse (751 pools)
  b.add_sequence({6}, 40, 0, blocks(300, 3));        // decode at 40: dense
  StepLayout l = layout();
  std::vector<int32_t> packed(l.max_packed_words());
  const size_t words = l.build(b, packed.data());

  EXPECT_EQ(l.rows(), 5);
  EXPECT_EQ(l.decode_rows(), 2);
  EXPECT_EQ(l.dense_decode_rows(), 1);
  EXPECT_EQ(l.max_decode_length(), 41);
  ASSERT_EQ(l.seqs().size(), 3u);
  EXPECT_EQ(l.seqs()[0].slot, 0);  // the dense decode row
  EXPECT_EQ(l.seqs()[1].slot, 1);  // the sparse one
  EXPECT_EQ(l.seqs()[2].slot, 2);  // the prefill chunk, rows 2..4
  EXPECT_EQ(l.seqs()[2].first_row, 2);
  EXPECT_EQ(l.seqs()[2].rows, 3);
  EXPECT_EQ(l.positions(), (std::vector<int32_t>{40, 3000, 32, 33, 34}));
  EXPECT_EQ(l.batch_row(0), 4);  // batch rows: chunk 0..2, then 3 (sparse), 4 (dense)
  EXPECT_EQ(l.batch_row(1), 3);
  EXPECT_EQ(l.batch_row(2), 0);
  // Logit rows stay in the batch's order (the chunk's last row, then the two decode rows).
  EXPECT_EQ(l.logit_rows(), (std::vector<int32_t>{4, 1, 0}));

  // Header, then {token, page row, position} per row: position 40 is block 2 (physical 306),
  // slot 8; position 3000 is block 187 (physical 200 + 561), slot 8.
  EXPECT_EQ(std::vector<int32_t>(packed.begin(), packed.begin() + 4),
            (std::vector<int32_t>{5, 3, 3, 3 + 188 + 3}));
  EXPECT_EQ(std::vector<int32_t>(packed.begin() + 4, packed.begin() + 10),
            (std::vector<int32_t>{6, 306 * kBlock + 8, 40, 5, 761 * kBlock + 8, 3000}));
  const int32_t* slots = packed.data() + 4 + 5 * 3 + 3;
  EXPECT_EQ(std::vector<int32_t>(slots, slots + 3), (std::vector<int32_t>{0, 1, 2}));
  const int32_t* offsets = slots + 3;
  EXPECT_EQ(std::vector<int32_t>(offsets, offsets + 4), (std::vector<int32_t>{0, 3, 191, 194}));
  EXPECT_EQ(offsets[4], 300);  // the dense row's table comes first
  EXPECT_EQ(words, size_t(4 + 15 + 3 + 3 + 4 + 194));
}

TEST(StepLayout, ABatchBeyondTheCapacityIsRefusedByName) {
  ForwardBatch big;
  big.add_sequence(std::vector<int32_t>(65, 1), 0, 0, blocks(0, 5));
  StepLayout l = layout();
  std::vector<int32_t> packed(l.max_packed_words());
  try {
    l.build(big, packed.data());
    FAIL() << "65 rows exceed 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("65 rows"), std::string::npos) << e.what();
  }
  ForwardBatch long_table;
  long_table.add_sequence({1}, 0, 0, blocks(0, 300));
  try {
    l.build(long_table, packed.data());
    FAIL() << "300 blocks exceed 256";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("300 blocks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparkglm
