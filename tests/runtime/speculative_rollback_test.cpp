// Rollback of a verify slice at the runner (engine/runtime/speculation/speculative_rollback.h):
// after a verify slice of 5, 9, 77, 130 of which 5 and 9 are accepted, the next row (200, where
// the draft 77 was wrong) computes, bit for bit, what it computes after plain decode rows of 5
// and 9, whether the state resumes from the record of the last accepted row (records) or from
// the state kept before the verify slice with 5 and 9 run again (recompute), also after
// rejections in a row; without the resume it does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

class SpeculativeRollbackRunnerTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  const LoadedModel& micro = testing::micro_model();
  const std::vector<int32_t> prompt = prompt_of(21);
  const std::vector<int32_t> table = {0, 1, 2};
  const int32_t p = 21;  // the verify slice's first position

  static std::vector<int32_t> prompt_of(int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 13 + 7 * 29 + 3) % 256;
    return t;
  }
  // A runner with `records` KDA state records per slot, the prompt prefilled.
  std::unique_ptr<cpu::CpuModelRunner> prefilled(int records) {
    cpu::CpuRunnerOptions o;
    o.num_blocks = 16;
    o.block_size = 16;
    o.num_state_slots = 1;
    o.state_records = records;
    auto r = std::make_unique<cpu::CpuModelRunner>(micro.config, micro.weights, o, pool);
    ForwardBatch batch;
    batch.add_sequence(prompt, 0, 0, table);
    batch.seqs.back().decode = false;
    ForwardOutput out;
    r->forward(batch, out);
    return r;
  }
  // One decode slice of `rows` from `start`, every row's logits returned. keep_before >= 0: the
  // state before that row is kept (recompute); -2: the state after each row (records).
  static std::vector<float> slice(ModelRunner& r, const std::vector<int32_t>& rows, int32_t start,
                                  int32_t keep_before, int32_t resume_record,
                                  const std::vector<int32_t>& block_table) {
    ForwardBatch batch;
    batch.add_sequence(rows, start, 0, block_table, true, true);
    batch.seqs.back().decode = true;
    batch.seqs.back().record_states = keep_before == -2;
    batch.seqs.back().record_before_row = std::max(keep_before, -1);
    batch.seqs.back().resume_record = resume_record;
    ForwardOutput out;
    r.forward(batch, out);
    return out.logits;
  }
  // The last row's logits after plain one-row decode slices of `tokens`.
  std::vector<float> decoded(const std::vector<int32_t>& tokens) {
    auto a = prefilled(0);
    std::vector<float> logits;
    for (size_t i = 0; i < tokens.size(); ++i)
      logits = slice(*a, {tokens[i]}, p + int32_t(i), -1, -1, table);
    return logits;
  }
  int64_t vocab() const { return micro.config.vocab_size; }
  std::vector<float> last_row(const std::vector<float>& logits) const {
    return {logits.end() - vocab(), logits.end()};
  }
};

TEST_F(SpeculativeRollbackRunnerTest, AResumedRecordIsTheStateOfTheAcceptedRows) {
  const std::vector<float> want = decoded({5, 9, 200});
  auto b = prefilled(4);
  slice(*b, {5, 9, 77, 130}, p, -2, -1, table);
  EXPECT_EQ(slice(*b, {200}, p + 2, -2, /*resume_record=*/1, table), want);
  auto c = prefilled(4);  // the negative control: no resume, the state of all four rows
  slice(*c, {5, 9, 77, 130}, p, -2, -1, table);
  EXPECT_NE(slice(*c, {200}, p + 2, -2, -1, table), want);
}

TEST_F(SpeculativeRollbackRunnerTest, TheKeptStateAndTheAcceptedRowsAgainAreTheSameState) {
  const std::vector<float> want = decoded({5, 9, 200});
  auto b = prefilled(1);
  slice(*b, {5, 9, 77, 130}, p, 0, -1, table);
  EXPECT_EQ(last_row(slice(*b, {5, 9, 200}, p, 2, /*resume_record=*/0, table)), want);
  auto c = prefilled(1);  // the negative control: the replay runs on from the verified state
  slice(*c, {5, 9, 77, 130}, p, 0, -1, table);
  EXPECT_NE(last_row(slice(*c, {5, 9, 200}, p, 2, -1, table)), want);
}

TEST_F(SpeculativeRollbackRunnerTest, RejectionsInARowReplayOnlyTheLastSlicesAcceptedRows) {
  // Verify 5, 9, 77, 130: 5 and 9 accepted. Then replay 5, 9 and verify 200, 44: only 200
  // accepted. Then replay 200 and decode 31: the state kept before 200, not before 5.
  const std::vector<float> want = decoded({5, 9, 200, 31});
  auto b = prefilled(1);
  slice(*b, {5, 9, 77, 130}, p, 0, -1, table);
  slice(*b, {5, 9, 200, 44}, p, 2, 0, table);
  EXPECT_EQ(last_row(slice(*b, {200, 31}, p + 2, 1, 0, table)), want);
}

TEST_F(SpeculativeRollbackRunnerTest, AKeptStateNeedsAStateRecordAndADecodeSlice) {
  auto none = prefilled(0);
  EXPECT_THROW(slice(*none, {5, 9}, p, 0, -1, table), Error);
  auto one = prefilled(1);
  EXPECT_THROW(slice(*one, {5, 9}, p, 2, -1, table), Error);  // no row 2
}

}  // namespace
}  // namespace sparkglm
