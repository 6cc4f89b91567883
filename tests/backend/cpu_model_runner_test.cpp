// End-to-end properties of the CPU forward pass on tinyglm-micro: batch invariance, prefill then
// decode equal to decode of every token, and the MTP head over a batch equal to row by row.
#include "engine/backend/cpu/cpu_model_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/model/model_loader.h"
#include "engine/model/selection_trace.h"
#include "engine/runtime/block_allocator.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

const LoadedModel& micro() {
  return testing::micro_model();
}

std::vector<int32_t> tokens_of(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 31 + salt * 17 + 5) % 256;
  return t;
}

// A sequence fed in chunks; logits of every row of every chunk are recorded.
struct Script {
  std::vector<int32_t> tokens;
  std::vector<int> chunks;  // lengths, summing to tokens.size()
};

struct SeqState {
  std::vector<int32_t> table;
  int pos = 0;
  std::vector<float> logits;  // all rows, in order
};

// Runs the scripts' chunk k of every sequence together in step k (sequences with no chunk k sit
// out).
std::vector<SeqState> run_together(const std::vector<Script>& scripts, ThreadPool& pool,
                                   bool reverse_blocks, cpu::KdaPath path = cpu::KdaPath::kAuto) {
  const LoadedModel& m = micro();
  cpu::CpuRunnerOptions opt{64, 16, 4, path};
  cpu::CpuModelRunner runner(m.config, m.weights, opt, pool);
  BlockAllocator blocks(opt.num_blocks);
  if (reverse_blocks) blocks.allocate(7);  // shift every block id the sequences get
  std::vector<SeqState> st(scripts.size());
  size_t steps = 0;
  for (const auto& s : scripts) steps = std::max(steps, s.chunks.size());
  for (size_t k = 0; k < steps; ++k) {
    ForwardBatch batch;
    std::vector<size_t> members;
    for (size_t i = 0; i < scripts.size(); ++i) {
      if (k >= scripts[i].chunks.size()) continue;
      const int n = scripts[i].chunks[k];
      blocks.ensure_capacity(st[i].table, st[i].pos + n, 16);
      const int slot = reverse_blocks ? int(scripts.size() - 1 - i) : int(i);
      batch.add_sequence(
          {scripts[i].tokens.begin() + st[i].pos, scripts[i].tokens.begin() + st[i].pos + n},
          st[i].pos, slot, st[i].table, true, /*all_logits=*/true);
      members.push_back(i);
    }
    ForwardOutput out;
    runner.forward(batch, out);
    const int64_t v = m.config.vocab_size;
    size_t row = 0;
    for (size_t i : members) {
      const int n = scripts[i].chunks[k];
      st[i].logits.insert(st[i].logits.end(), out.logits.begin() + int64_t(row) * v,
                          out.logits.begin() + int64_t(row + size_t(n)) * v);
      row += size_t(n);
      st[i].pos += n;
    }
  }
  return st;
}

double max_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / den;
}

TEST(CpuModelRunner, EachSequenceInAMixedBatchIsBitwiseEqualToRunningItAlone) {
  // Prefill chunks and decode rows mixed in one step, sequences past the indexer's sparse
  // threshold.
  const std::vector<Script> scripts = {
      {tokens_of(45, 1), {37, 1, 1, 6}},  // long prefill, then decode, then a chunk
      {tokens_of(26, 2), {20, 1, 5}},     // resumed prefill at a non-aligned position
      {tokens_of(3, 3), {1, 1, 1}},       // decode only
      {tokens_of(70, 4), {64, 6}},        // crosses the KDA chunk boundary at 64
  };
  ThreadPool two(2), one(1);
  const auto together = run_together(scripts, two, false);
  for (size_t i = 0; i < scripts.size(); ++i) {
    const auto alone = run_together({scripts[i]}, one, true);
    ASSERT_EQ(alone[0].logits.size(), together[i].logits.size());
    EXPECT_EQ(std::memcmp(alone[0].logits.data(), together[i].logits.data(),
                          alone[0].logits.size() * sizeof(float)),
              0)
        << "sequence " << i << ": max rel diff "
        << max_rel_error(alone[0].logits, together[i].logits);
  }
}

TEST(CpuModelRunner, PrefillThenDecodeEqualsDecodingEveryToken) {
  const auto tokens = tokens_of(80, 9);
  const Script prefill{tokens, {72, 1, 1, 1, 1, 1, 1, 1, 1}};
  const Script decode{tokens, std::vector<int>(80, 1)};
  ThreadPool pool(2);
  // With the token-by-token KDA path everywhere the two schedules run the same arithmetic.
  const auto a = run_together({prefill}, pool, false, cpu::KdaPath::kRecurrent);
  const auto b = run_together({decode}, pool, false, cpu::KdaPath::kRecurrent);
  EXPECT_EQ(std::memcmp(a[0].logits.data(), b[0].logits.data(), a[0].logits.size() * sizeof(float)),
            0)
      << "max rel diff " << max_rel_error(a[0].logits, b[0].logits);
  // The chunked KDA prefill differs only by rounding: logits agree to 1e-4 of their largest value.
  const auto c = run_together({prefill}, pool, false, cpu::KdaPath::kAuto);
  const double err = max_rel_error(c[0].logits, b[0].logits);
  EXPECT_LT(err, 1e-4) << "chunked prefill vs token-by-token: " << err;
  EXPECT_GT(err, 0.0) << "the chunked path should have run (its rounding differs)";
}

TEST(CpuModelRunner, MtpOverABatchEqualsRowByRow) {
  const LoadedModel& m = micro();
  ThreadPool pool(2);
  const auto tokens = tokens_of(30, 5);
  const int64_t t = 30, d = m.config.hidden_size, v = m.config.vocab_size;
  auto hidden_of = [&](cpu::CpuModelRunner& r, std::vector<int32_t>& table) {
    ForwardBatch b;
    b.add_sequence(tokens, 0, 0, table, true, true);
    ForwardOutput o;
    r.forward(b, o);
    return o.hidden;
  };
  cpu::CpuModelRunner r1(m.config, m.weights, {8, 16, 1}, pool),
      r2(m.config, m.weights, {8, 16, 1}, pool);
  std::vector<int32_t> table = {0, 1};
  const auto h1 = hidden_of(r1, table);
  const auto h2 = hidden_of(r2, table);
  ASSERT_EQ(h1, h2);
  ForwardBatch all;
  all.add_sequence({tokens.begin() + 1, tokens.end()}, 0, 0, table, true, true);
  ForwardOutput batched;
  r1.forward_mtp(all, {h1.begin(), h1.end() - d}, batched);
  ASSERT_EQ(int64_t(batched.logits.size()), (t - 1) * v);
  for (int64_t i = 0; i + 1 < t; ++i) {
    ForwardBatch one;
    one.add_sequence({tokens[size_t(i + 1)]}, int32_t(i), 0, table);
    ForwardOutput o;
    r2.forward_mtp(one, {h2.begin() + i * d, h2.begin() + (i + 1) * d}, o);
    ASSERT_EQ(
        std::memcmp(o.logits.data(), batched.logits.data() + i * v, size_t(v) * sizeof(float)), 0)
        << "MTP row " << i;
  }
}

TEST(CpuModelRunner, RejectsABatchThatDoesNotFitItsCaches) {
  const LoadedModel& m = micro();
  ThreadPool pool(1);
  cpu::CpuModelRunner r(m.config, m.weights, {2, 16, 1}, pool);
  ForwardBatch b;
  b.add_sequence(tokens_of(40, 1), 0, 0, {0, 1});  // 40 positions need 3 blocks of 16
  ForwardOutput o;
  EXPECT_THROW(r.forward(b, o), Error);
  ForwardBatch bad_token;
  bad_token.add_sequence({m.config.vocab_size}, 0, 0, {0});
  EXPECT_THROW(r.forward(bad_token, o), Error);
}

// selection_trace.h: a traced runner records one entry per sparse row of each MLA layer, each the
// tokens it attended (topk pools' tokens and those of its own unfinished pool, in increasing order,
// none past the row), and tracing changes no logit.
TEST(CpuModelRunner, ASelectionTraceRecordsEverySparseRowAndChangesNoLogit) {
  const LoadedModel& m = micro();
  const ModelConfig& c = m.config;
  const std::vector<int32_t> tokens = tokens_of(100, 5);
  ThreadPool pool(2);
  SelectionTrace trace;
  std::vector<float> logits[2];
  for (int traced = 0; traced < 2; ++traced) {
    cpu::CpuRunnerOptions opt{64, 16, 4};
    if (traced == 1) opt.selection_trace = &trace;
    cpu::CpuModelRunner runner(c, m.weights, opt, pool);
    std::vector<int32_t> table;
    BlockAllocator blocks(opt.num_blocks);
    for (const auto& [start, n] : {std::pair{0, 64}, std::pair{64, 36}}) {
      blocks.ensure_capacity(table, start + n, opt.block_size);
      ForwardBatch b;
      b.add_sequence({tokens.begin() + start, tokens.begin() + start + n}, start, 2, table, true,
                     /*all_logits=*/true);
      ForwardOutput out;
      runner.forward(b, out);
      logits[traced].insert(logits[traced].end(), out.logits.begin(), out.logits.end());
    }
  }
  EXPECT_EQ(logits[0], logits[1]);
  const int topk = c.index_topk_pools(), kpool = c.index_kpool;
  int sparse = 0;
  for (int32_t t = 0; t < 100; ++t) {
    const std::vector<int32_t> got = trace.tokens(0, 2, t);
    if ((t + 1) / kpool <= topk) {  // sees at most topk pools: dense, not recorded
      EXPECT_TRUE(got.empty()) << "dense row " << t;
      continue;
    }
    ++sparse;
    EXPECT_GE(int(got.size()), topk * kpool) << "row " << t;
    EXPECT_LE(int(got.size()), topk * kpool + kpool - 1) << "row " << t;
    EXPECT_TRUE(std::adjacent_find(got.begin(), got.end(), std::greater_equal<int32_t>()) ==
                got.end())
        << "row " << t << ": not strictly increasing";
    EXPECT_LE(got.back(), t) << "row " << t;
  }
  EXPECT_GT(sparse, 50);
  EXPECT_EQ(trace.size(), size_t(sparse)) << "one MLA layer: one entry per sparse row";
}

}  // namespace
}  // namespace sparkglm
