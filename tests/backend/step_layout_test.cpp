// The CUDA runner's step order and packed words (engine/backend/step_layout.h), on the host: dense
// decode rows first, then decode rows the indexer selects for, then prefill chunks; page rows from
// the block tables; logit rows and batch rows mapped both ways; capacity errors; verify slices
// (several decode rows of one sequence) as one-row decode rows ordered by wave, with their KDA
// groups and state records.
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
  // Then the KDA record words: no record after or before any sequence.
  const int32_t* records = offsets + 4 + 194;
  EXPECT_EQ(std::vector<int32_t>(records, records + 6), std::vector<int32_t>(6, -1));
  EXPECT_FALSE(l.records_after());
  EXPECT_FALSE(l.records_before());
  EXPECT_EQ(words, size_t(4 + 15 + 3 + 3 + 4 + 194 + 6));
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

TEST(StepLayout, VerifySlicesBecomeOneRowDecodeRowsWaveByWave) {
  ForwardBatch b;
  // A: a verify slice of 4 rows at 2049..2052, dense up to 2050, sparse from 2051 (slot 0).
  b.add_sequence({1, 2, 3, 4}, 2049, 0, blocks(0, 129), false, true);
  b.seqs.back().decode = true;
  b.seqs.back().record_states = true;
  b.add_sequence({5}, 10, 1, blocks(300, 1));                  // B: a plain decode row (slot 1)
  b.add_sequence({6, 7}, 20, 2, blocks(400, 2), false, true);  // C: verify of 2 rows (slot 2)
  b.seqs.back().decode = true;
  b.seqs.back().record_states = true;
  b.add_sequence({8, 9, 10}, 0, 3, blocks(500, 1));  // D: a prompt piece (slot 3)
  StepLayout l = layout(64, 16);
  std::vector<int32_t> packed(l.max_packed_words());
  l.build(b, packed.data());
  EXPECT_TRUE(l.speculative());
  EXPECT_EQ(l.rows(), 10);
  EXPECT_EQ(l.decode_rows(), 7);
  EXPECT_EQ(l.dense_decode_rows(), 5);
  EXPECT_EQ(l.max_decode_length(), 2051);
  // Dense: wave 0 (A0, B, C0), wave 1 (A1, C1); sparse: wave 2 (A2), wave 3 (A3); then D.
  const std::vector<int> batch_rows = {0, 4, 5, 1, 6, 2, 3, 7, 8, 9};
  const std::vector<int32_t> positions = {2049, 10, 20, 2050, 21, 2051, 2052, 0, 1, 2};
  for (int r = 0; r < 10; ++r) {
    EXPECT_EQ(l.batch_row(r), batch_rows[size_t(r)]) << "step row " << r;
    EXPECT_EQ(l.positions()[size_t(r)], positions[size_t(r)]) << "step row " << r;
  }
  ASSERT_EQ(l.seqs().size(), 8u);
  const std::vector<int> slots = {0, 1, 2, 0, 2, 0, 0, 3}, waves = {0, 0, 0, 1, 1, 2, 3, 0};
  const std::vector<int> record_after = {0, -1, 0, 1, 1, 2, 3, -1};
  for (size_t i = 0; i < 8; ++i) {
    const StepSequence& q = l.seqs()[i];
    EXPECT_EQ(q.first_row, int(i)) << i;
    EXPECT_EQ(q.slot, slots[i]) << i;
    EXPECT_EQ(q.decode, i < 7) << i;
    EXPECT_EQ(q.wave, waves[i]) << i;
    EXPECT_EQ(q.record_after, record_after[i]) << i;
    EXPECT_FALSE(q.record_before) << i;
    EXPECT_EQ(q.index, int(i)) << i;
  }
  EXPECT_EQ(l.seqs()[7].rows, 3);
  // KDA groups: each slot at most once, a slot's rows in position order.
  const std::vector<std::pair<int, int>> groups = {{0, 3}, {3, 2}, {5, 1}, {6, 1}};
  ASSERT_EQ(l.decode_groups().size(), groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    EXPECT_EQ(l.decode_groups()[g].first_row, groups[g].first) << g;
    EXPECT_EQ(l.decode_groups()[g].rows, groups[g].second) << g;
  }
  // Every decode row carries its own copy of its sequence's block table.
  EXPECT_EQ(packed[1], 8);
  const int32_t* slot_words = packed.data() + kStepHeaderWords + 10 * kStepRowWords + 8;
  EXPECT_EQ(std::vector<int32_t>(slot_words, slot_words + 8),
            (std::vector<int32_t>(slots.begin(), slots.end())));
  const int32_t* offsets = slot_words + 8;
  EXPECT_EQ(offsets[8], 129 * 4 + 1 + 2 * 2 + 1);
  // The record words after the tables: each decode row's record_after, then record_before (-1).
  const int32_t* records = offsets + 9 + offsets[8];
  EXPECT_EQ(std::vector<int32_t>(records, records + 8),
            (std::vector<int32_t>(record_after.begin(), record_after.end())));
  EXPECT_EQ(std::vector<int32_t>(records + 8, records + 16), std::vector<int32_t>(8, -1));
  EXPECT_TRUE(l.records_after());
  EXPECT_FALSE(l.records_before());
  // The logit rows follow their rows: A's four (batch rows 0..3) are step rows 0, 3, 5, 6, then
  // B's, C's two and D's last.
  EXPECT_EQ(l.logit_rows(), (std::vector<int32_t>{0, 3, 5, 6, 1, 2, 4, 9}));
}

TEST(StepLayout, APlainDecodeStepKeepsOneKdaGroupAndARecomputeSliceRecordsBeforeItsRow) {
  ForwardBatch plain;
  plain.add_sequence({1}, 5, 0, blocks(0, 1));
  plain.add_sequence({2}, 7, 1, blocks(10, 1));
  StepLayout l = layout();
  std::vector<int32_t> packed(l.max_packed_words());
  l.build(plain, packed.data());
  EXPECT_FALSE(l.speculative());
  ASSERT_EQ(l.decode_groups().size(), 1u);
  EXPECT_EQ(l.decode_groups()[0].rows, 2);

  ForwardBatch recompute;
  recompute.add_sequence({1, 2, 3}, 5, 0, blocks(0, 1), false);
  recompute.seqs.back().decode = true;
  recompute.seqs.back().record_before_row = 2;
  recompute.seqs.back().resume_record = 0;
  recompute.logit_rows = {2};
  StepLayout r = layout(64, 8);
  std::vector<int32_t> words(r.max_packed_words());
  r.build(recompute, words.data());
  EXPECT_TRUE(r.speculative());
  ASSERT_EQ(r.seqs().size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.seqs()[size_t(i)].record_before, i == 2) << i;
    EXPECT_EQ(r.seqs()[size_t(i)].record_after, -1) << i;
  }
  EXPECT_EQ(r.decode_groups().size(), 3u);
  EXPECT_FALSE(r.records_after());
  EXPECT_TRUE(r.records_before());
  // record_before words (after record_after's): record 0 before row 2 only.
  const size_t used = r.build(recompute, words.data());
  EXPECT_EQ(std::vector<int32_t>(words.begin() + int64_t(used) - 6, words.begin() + int64_t(used)),
            (std::vector<int32_t>{-1, -1, -1, -1, -1, 0}));
  // A prompt piece that records its states is refused, not silently left unrecorded.
  ForwardBatch recording_prompt;
  recording_prompt.add_sequence({1, 2, 3}, 0, 0, blocks(0, 1), false);
  recording_prompt.seqs.back().record_states = true;
  EXPECT_THROW(r.build(recording_prompt, words.data()), Error);
  // Beyond the sequences the step's layout holds: three decode rows need three.
  StepLayout small = layout(64, 2);
  std::vector<int32_t> few(small.max_packed_words());
  EXPECT_THROW(small.build(recompute, few.data()), Error);
}

}  // namespace
}  // namespace sparkglm
