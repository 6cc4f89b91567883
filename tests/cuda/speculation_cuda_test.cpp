// Speculative decoding on the CUDA runner (docs/speculative-decoding.md, section "CUDA"), on
// tinyglm with dummy weights:
//  - a verify step's rows (widths 2..5; one sequence, two of different widths, four) compute the
//    logits and hidden states of one-row decode steps of the same tokens, bit for bit, whether the
//    verify step is captured in a CUDA graph, replayed from it, run eagerly (set_eager, as
//    --enforce-eager) or submitted and collected; the decode steps replay their own graphs. With
//    the verify-graph cap at 1, shapes beyond it run eagerly with the same bits;
//  - rollback: after a rejected draft, the KDA state (every layer's recurrent state and conv
//    history, read through a snapshot) and the next row's logits equal the non-speculative run's,
//    bit for bit, with state records (resume_record) and with recompute (record_before_row, the
//    accepted rows run again), the records written inside graphed verify steps and eagerly;
//    without the resume they differ;
//  - forward_mtp over several rows of a sequence and then one row (the drafter's two calls)
//    returns one hidden state and one logit row per asked row, close to the MTP module over the
//    same rows in one call; the one-row call (a chained pass) is captured in a graph, replays it,
//    and computes the same bits as eagerly;
//  - through the scheduler, greedy output with k = 1, 2, 3 drafts (the MTP module's, and an
//    oracle's that are mostly right) is the output without speculation, tokens and logprobs, at
//    C1 and C4, with either rollback, with graphs (verify steps replayed from graphs) and
//    without; every block returns to the pool;
//  - the drafter's first forward run inside the verify step (StepSampling::draft_on_picks)
//    changes no token and drafts as well as the drafter's own forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/model/config.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/speculation/drafter.h"
#include "engine/runtime/speculation/speculative_rollback.h"
#include "engine/runtime/speculation/speculator.h"
#include "tests/cuda/cuda_test_support.h"
#include "tests/cuda/served_models.h"
#include "tests/support/byte_texts.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

// tinyglm (or `model`) with `slots` state slots (four unless a test needs more), state records for
// k = 4 drafts (or widths up to 5) and decode slices of up to 7 rows (2k + 1 for k = 3 with
// recompute).
std::unique_ptr<cuda::CudaModelRunner> spec_runner(int snapshots = 0, int max_verify_graphs = 64,
                                                   const std::string& model = "tinyglm",
                                                   int slots = 4) {
  const ModelConfig c = cuda_test::served_config(model);
  cuda::CudaRunnerOptions o;
  o.num_blocks = slots * 64;
  o.block_size = 16;
  o.num_state_slots = slots;
  o.num_snapshots = snapshots;
  o.state_records = 5;
  o.decode_slice_rows = 7;
  o.max_rows = 256 + 4 * 7;
  o.max_seq_len = 1024;
  o.max_verify_graphs = max_verify_graphs;
  return std::make_unique<cuda::CudaModelRunner>(c, cuda_test::served_device_weights(model, c), o);
}

std::vector<int32_t> tokens_of(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 13 + salt * 29 + 3) % 256);
  return t;
}

std::vector<int32_t> table(int first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

// A decode slice of `tokens` at `start` (a verify slice when longer than one row) with every
// row's logits.
void add_decode(ForwardBatch& b, const std::vector<int32_t>& tokens, int start, int slot,
                const std::vector<int32_t>& blocks) {
  b.add_sequence(tokens, start, slot, blocks, /*want_logits=*/true, /*all_logits=*/true);
  b.seqs.back().decode = true;
}

bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// Four sequences (slots 0..3, prompts of 40, 23, 57 and 9 tokens), prefilled afresh.
struct Sequences {
  static constexpr int kLengths[4] = {40, 23, 57, 9};
  std::vector<int32_t> prompt(int i) const { return tokens_of(kLengths[i], i + 1); }
  std::vector<int32_t> blocks(int i) const { return table(10 * i, 4); }
  void prefill(ModelRunner& r, int count) const {
    ForwardBatch b;
    for (int i = 0; i < count; ++i) {
      b.add_sequence(prompt(i), 0, i, blocks(i));
      b.seqs.back().decode = false;
    }
    ForwardOutput out;
    r.forward(b, out);
  }
};

// A verify step's sequences: sequence i's slice is `width + width_offset[i]` rows wide.
struct VerifyCase {
  const char* name;
  std::vector<int> width_offset;
  int max_verify_graphs;
};

void PrintTo(const VerifyCase& c, std::ostream* os) {
  *os << c.name;
}

class CudaSpeculationVerify : public ::testing::TestWithParam<VerifyCase> {};

INSTANTIATE_TEST_SUITE_P(Batch, CudaSpeculationVerify,
                         ::testing::Values(VerifyCase{"C1", {0}, 64},
                                           VerifyCase{"C2_mixed_widths", {0, -1}, 64},
                                           VerifyCase{"C4", {0, 0, 0, 0}, 64},
                                           VerifyCase{"C4_graph_cap_1", {0, 0, 0, 0}, 1}),
                         [](const ::testing::TestParamInfo<VerifyCase>& i) {
                           return std::string(i.param.name);
                         });

TEST_P(CudaSpeculationVerify, VerifyRowsComputeTheDecodeRowsBitsGraphedAndEagerAtWidthsTwoToFive) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const VerifyCase& c = GetParam();
  const auto runner = spec_runner(0, c.max_verify_graphs);
  cuda::CudaModelRunner& r = *runner;
  const int64_t V = r.config().vocab_size, D = r.config().hidden_size;
  const int n = int(c.width_offset.size());
  const Sequences s;
  for (int w = 2; w <= 5; ++w) {
    SCOPED_TRACE("width " + std::to_string(w));
    std::vector<int> widths;
    std::vector<std::vector<int32_t>> rows;
    for (int i = 0; i < n; ++i) {
      widths.push_back(w + c.width_offset[size_t(i)]);
      rows.push_back(tokens_of(widths.back(), 10 * i + w));
    }
    // Non-speculative: one decode row per sequence and step (graphs replayed). ref[i]: sequence
    // i's rows' logits, then hidden states.
    s.prefill(r, n);
    std::vector<std::vector<float>> ref_logits(static_cast<size_t>(n)),
        ref_hidden(static_cast<size_t>(n));
    for (int j = 0; j < w; ++j) {
      ForwardBatch b;
      std::vector<int> in;
      for (int i = 0; i < n; ++i)
        if (j < widths[size_t(i)]) {
          b.add_sequence({rows[size_t(i)][size_t(j)]}, Sequences::kLengths[i] + j, i, s.blocks(i));
          in.push_back(i);
        }
      ForwardOutput out;
      r.forward(b, out);
      for (size_t q = 0; q < in.size(); ++q) {
        auto& l = ref_logits[size_t(in[q])];
        auto& h = ref_hidden[size_t(in[q])];
        l.insert(l.end(), out.logits.begin() + int64_t(q) * V,
                 out.logits.begin() + int64_t(q + 1) * V);
        h.insert(h.end(), out.hidden.begin() + int64_t(q) * D,
                 out.hidden.begin() + int64_t(q + 1) * D);
      }
    }
    // Speculative: one step of every sequence's verify slice, recording states.
    ForwardBatch verify;
    for (int i = 0; i < n; ++i) {
      add_decode(verify, rows[size_t(i)], Sequences::kLengths[i], i, s.blocks(i));
      verify.seqs.back().record_states = true;
    }
    // Within the cap, this width's verify shape is captured by the first pass and replayed by the
    // second and the fourth; the third runs eagerly. Beyond it, every pass runs eagerly.
    const bool graphed = w - 2 < c.max_verify_graphs;
    const char* passes[] = {"forward, first", "forward, again", "forward, set_eager(true)",
                            "submit/collect"};
    for (int pass = 0; pass < 4; ++pass) {
      SCOPED_TRACE(passes[pass]);
      s.prefill(r, n);
      const StepGraphStats before = r.graph_stats();
      r.set_eager(pass == 2);
      std::vector<float> logits, hidden;
      if (pass < 3) {
        ForwardOutput out;
        r.forward(verify, out);
        logits = std::move(out.logits);
        hidden = std::move(out.hidden);
      } else {
        StepSampling none;  // no row picked on the device: every row's logits come back
        r.submit(verify, none);
        StepResult result;
        r.collect(result);
        logits = std::move(result.logits);
        hidden = std::move(result.hidden);
      }
      r.set_eager(false);
      const StepGraphStats after = r.graph_stats();
      const bool ran_graphed = graphed && pass != 2;
      EXPECT_EQ(after.verify_graph_steps - before.verify_graph_steps, ran_graphed ? 1u : 0u);
      EXPECT_EQ(after.verify_eager_steps - before.verify_eager_steps, ran_graphed ? 0u : 1u);
      EXPECT_EQ(after.verify_graphs - before.verify_graphs, graphed && pass == 0 ? 1 : 0);
      int64_t row = 0;
      for (int i = 0; i < n; ++i) {
        ASSERT_GE(logits.size(), size_t((row + widths[size_t(i)]) * V));
        ASSERT_GE(hidden.size(), size_t((row + widths[size_t(i)]) * D));
        for (int j = 0; j < widths[size_t(i)]; ++j, ++row) {
          EXPECT_TRUE(
              same_bits(&logits[size_t(row * V)], &ref_logits[size_t(i)][size_t(j * V)], size_t(V)))
              << "sequence " << i << " row " << j;
          EXPECT_TRUE(
              same_bits(&hidden[size_t(row * D)], &ref_hidden[size_t(i)][size_t(j * D)], size_t(D)))
              << "sequence " << i << " row " << j;
        }
      }
      EXPECT_EQ(logits.size(), size_t(row * V));
    }
  }
  const StepGraphStats g = r.graph_stats();
  EXPECT_LE(g.verify_graphs, c.max_verify_graphs);
  EXPECT_GT(g.decode_graph_steps, 0u) << "the decode reference ran in graphs";
  EXPECT_GT(r.graph_replays(), 0u);
  std::printf("[ graphs   ] %s: %d decode and %d verify graphs, %zu bytes of device memory\n",
              c.name, g.decode_graphs, g.verify_graphs, g.graph_bytes);
}

// The start-up line bounds what may be captured (host only: no device needed).
TEST(CudaSpeculation, TheGraphPlanBoundsDecodeAndVerifyGraphsAndNamesEnforceEager) {
  const ModelConfig c = preset_config("tinyglm");
  cuda::CudaRunnerOptions o;
  o.num_state_slots = 4;
  o.max_seq_len = 1024;
  o.max_sparse_graphs = 9;
  const std::string plain = cuda::CudaModelRunner::graph_plan(c, o);
  EXPECT_NE(
      plain.find("decode steps of 1-4 dense rows x 4 attention length buckets (at most 16 graphs)"),
      std::string::npos)
      << plain;
  EXPECT_NE(plain.find("with sparse-indexer rows one graph per (rows, dense rows, length bucket, "
                       "pool bucket), at most 9, further shapes eager"),
            std::string::npos)
      << plain;
  EXPECT_EQ(plain.find("verify"), std::string::npos) << plain;
  o.state_records = 4;
  o.decode_slice_rows = 4;
  o.max_verify_graphs = 12;
  const std::string spec = cuda::CudaModelRunner::graph_plan(c, o);
  EXPECT_NE(spec.find("verify steps of up to 16 rows (slices of up to 4)"), std::string::npos)
      << spec;
  EXPECT_NE(spec.find("at most 12 graphs"), std::string::npos) << spec;
  EXPECT_NE(spec.find("the drafter's chained MTP passes one graph per (rows, dense rows, length "
                      "bucket, pool bucket), at most 12 more"),
            std::string::npos)
      << spec;
  o.graphs = false;
  EXPECT_NE(cuda::CudaModelRunner::graph_plan(c, o).find("--enforce-eager"), std::string::npos);
}

// The KDA state of slot 0 of every layer, through snapshot 0 (saved by the slice).
std::vector<std::byte> saved_state(cuda::CudaModelRunner& r) {
  std::vector<std::byte> bytes(r.host_snapshot_bytes());
  r.copy_snapshot_to_host(0, bytes.data());
  return bytes;
}

// Each rollback, with verify steps in graphs (the state records written inside them) and eagerly.
class CudaSpeculationRollback
    : public ::testing::TestWithParam<std::tuple<SpeculativeRollback, bool>> {
 protected:
  SpeculativeRollback rollback() const { return std::get<0>(GetParam()); }
  bool graphs() const { return std::get<1>(GetParam()); }
  // After a run: verify steps ran in graphs exactly when the parameter says so.
  void expect_graphed_verify_steps(const cuda::CudaModelRunner& r) const {
    const StepGraphStats g = r.graph_stats();
    if (graphs()) {
      EXPECT_GT(g.verify_graph_steps, 0u) << "verify steps replayed from graphs";
    } else {
      EXPECT_EQ(g.verify_graph_steps, 0u) << "set_eager(true): no verify graph";
      EXPECT_GT(g.verify_eager_steps, 0u);
    }
  }
};

INSTANTIATE_TEST_SUITE_P(
    Rollback, CudaSpeculationRollback,
    ::testing::Combine(::testing::Values(SpeculativeRollback::kRecords,
                                         SpeculativeRollback::kRecompute),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<SpeculativeRollback, bool>>& i) {
      return std::string(speculative_rollback_name(std::get<0>(i.param))) +
             (std::get<1>(i.param) ? "_graphs" : "_eager");
    });

// A verify slice of 4 rows [t0..t3] at P; rows 0..r accepted, then token x at P + r + 1.
TEST_P(CudaSpeculationRollback, AfterARejectedDraftTheStateIsTheNonSpeculativeRunsBitForBit) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const bool records = rollback() == SpeculativeRollback::kRecords;
  const auto runner = spec_runner(/*snapshots=*/1);
  cuda::CudaModelRunner& run = *runner;
  run.set_eager(!graphs());
  const int64_t V = run.config().vocab_size;
  const Sequences s;
  const int P = 40, w = 4;
  const std::vector<int32_t> drafts = tokens_of(w, 7);
  const int32_t x = 77;
  for (int r = 0; r < w; ++r) {
    SCOPED_TRACE("rows accepted: " + std::to_string(r + 1));
    // Non-speculative: t0..tr, then x, one row a step; the state after x saved.
    s.prefill(run, 2);
    for (int i = 0; i <= r; ++i) {
      ForwardBatch b;
      b.add_sequence({drafts[size_t(i)]}, P + i, 0, s.blocks(0));
      ForwardOutput out;
      run.forward(b, out);
    }
    ForwardBatch last;
    last.add_sequence({x}, P + r + 1, 0, s.blocks(0));
    last.seqs.back().save_snapshot = 0;
    ForwardOutput ref;
    run.forward(last, ref);
    const std::vector<std::byte> ref_state = saved_state(run);

    // Speculative: the verify slice, then x resuming from the last accepted row.
    for (bool resume : {true, false}) {
      s.prefill(run, 2);
      ForwardBatch verify;
      add_decode(verify, drafts, P, 0, s.blocks(0));
      if (records) {
        verify.seqs.back().record_states = true;
      } else {
        verify.seqs.back().record_before_row = 0;
      }
      ForwardOutput out;
      run.forward(verify, out);
      ForwardBatch next;
      if (records) {
        next.add_sequence({x}, P + r + 1, 0, s.blocks(0));
        next.seqs.back().resume_record = resume ? r : -1;
      } else {
        // The accepted rows run again (no logits), then x; the state before x kept in record 0.
        std::vector<int32_t> rows(drafts.begin(), drafts.begin() + r + 1);
        rows.push_back(x);
        next.add_sequence(rows, P, 0, s.blocks(0), /*want_logits=*/true);
        next.seqs.back().decode = true;
        next.seqs.back().record_before_row = r + 1;
        next.seqs.back().resume_record = resume ? 0 : -1;
        if (!resume) {  // without the resume the replayed rows run on the rejected state
          next.seqs.back().record_before_row = -1;
          next.seqs.back().record_states = true;
        }
      }
      next.seqs.back().save_snapshot = 0;
      run.forward(next, out);
      ASSERT_EQ(out.logits.size(), size_t(V));
      const bool same = same_bits(out.logits.data(), ref.logits.data(), size_t(V)) &&
                        saved_state(run) == ref_state;
      if (resume) {
        EXPECT_TRUE(same_bits(out.logits.data(), ref.logits.data(), size_t(V))) << "x's logits";
        EXPECT_TRUE(saved_state(run) == ref_state) << "the KDA state after x";
      } else if (records && r == w - 1) {
        EXPECT_TRUE(same) << "every row accepted: nothing to roll back";
      } else if (r < w - 1 || !records) {
        EXPECT_FALSE(same) << "a rollback that never restores must change the state";
      }
    }
  }
  expect_graphed_verify_steps(run);
}

// Sequence 0's prompt through the main model (every row's hidden state), and the forward_mtp
// calls over it the drafter makes: rows first..first+rows-1 on their next tokens, a one-row call
// as a decode row (a chained pass).
struct MtpOverPrompt {
  cuda::CudaModelRunner& r;
  Sequences s;
  std::vector<int32_t> prompt = s.prompt(0);
  ForwardOutput h;
  explicit MtpOverPrompt(cuda::CudaModelRunner& runner) : r(runner) {
    ForwardBatch model;
    model.add_sequence(prompt, 0, 0, s.blocks(0), true, /*all_logits=*/true);
    model.seqs.back().decode = false;
    r.forward(model, h);
  }
  void run(int first, int rows, ForwardOutput& out) {
    const int64_t D = r.config().hidden_size;
    ForwardBatch b;
    b.add_sequence({prompt.begin() + first + 1, prompt.begin() + first + 1 + rows}, first, 0,
                   s.blocks(0), true);
    b.seqs.back().decode = rows == 1;
    r.forward_mtp(
        b, std::vector<float>(h.hidden.begin() + first * D, h.hidden.begin() + (first + rows) * D),
        out);
  }
};

TEST(CudaSpeculation, ForwardMtpOverSeveralRowsThenOneRowFollowsTheModule) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner();
  cuda::CudaModelRunner& r = *runner;
  const int64_t V = r.config().vocab_size, D = r.config().hidden_size;
  MtpOverPrompt mtp(r);
  ASSERT_EQ(mtp.h.hidden.size(), size_t(40 * D));
  const int n = 30;  // rows 0..n-1 on their next tokens, then row n alone
  ForwardOutput several, one, whole;
  mtp.run(0, n, several);
  EXPECT_EQ(several.logits.size(), size_t(V));
  EXPECT_EQ(several.hidden.size(), size_t(D));
  mtp.run(n, 1, one);
  ASSERT_EQ(one.logits.size(), size_t(V));
  ASSERT_EQ(one.hidden.size(), size_t(D));
  mtp.run(0, n + 1, whole);
  ASSERT_EQ(whole.logits.size(), size_t(V));
  // Row n as a decode row after the rows before it, against row n inside a prefill of them all:
  // the two paths round differently, but compute the same thing.
  EXPECT_LT(cuda_test::nmse(one.logits, whole.logits), 1e-2);
  EXPECT_LT(cuda_test::nmse(one.hidden, whole.hidden), 1e-2);
}

// A prompt step's MTP rows (StepSampling::mtp_next, run_prompt_drafts): after the layers and
// the head, in the same submit, the module over every prompt row on the token after it and, at
// the last row, on the step's own greedy pick. That is the drafter's first forward over the
// prompt (forward_mtp over the states the main model returned, the way a step without it
// drafts), bit for bit at the last row: sequence 0 the drafter's way, sequence 1 the step's.
TEST(CudaSpeculation, APromptStepsMtpRowsAreTheDraftersFirstForward) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner();
  cuda::CudaModelRunner& r = *runner;
  ASSERT_TRUE(r.drafts_over_prompts());
  const int64_t V = r.config().vocab_size, D = r.config().hidden_size;
  Sequences s;
  const std::vector<int32_t> prompt = s.prompt(0);
  const int64_t T = int64_t(prompt.size());
  ForwardBatch model;
  model.add_sequence(prompt, 0, 0, s.blocks(0), true, /*all_logits=*/true);
  model.seqs.back().decode = false;
  ForwardOutput h;
  r.forward(model, h);
  const int32_t pick = greedy_token(&h.logits[size_t((T - 1) * V)], V);
  std::vector<int32_t> next(prompt.begin() + 1, prompt.end());
  next.push_back(pick);
  ForwardBatch mtp;
  mtp.add_sequence(next, 0, 0, s.blocks(0), true);
  mtp.seqs.back().decode = false;
  ForwardOutput own;
  r.forward_mtp(mtp, h.hidden, own);

  ForwardBatch step;
  step.add_sequence(prompt, 0, 1, s.blocks(1), true);
  step.seqs.back().decode = false;
  StepSampling sampling;
  sampling.mtp_next = next;
  sampling.mtp_next.back() = -1;  // the row's pick
  r.submit(step, sampling);
  StepResult result;
  r.collect(result);
  ASSERT_EQ(result.tokens.size(), 1u);
  EXPECT_EQ(result.tokens[0], pick);
  EXPECT_EQ(result.draft_tokens, std::vector<int32_t>{pick});
  ASSERT_EQ(result.hidden.size(), size_t(D));
  EXPECT_TRUE(same_bits(result.hidden.data(), &h.hidden[size_t((T - 1) * D)], size_t(D)));
  ASSERT_EQ(result.draft_logits.size(), size_t(V));
  ASSERT_EQ(result.draft_hidden.size(), size_t(D));
  EXPECT_TRUE(same_bits(result.draft_logits.data(), own.logits.data(), size_t(V)));
  EXPECT_TRUE(same_bits(result.draft_hidden.data(), own.hidden.data(), size_t(D)));
  // The module's cache of sequence 1 now holds sequence 0's: a chained pass from each computes
  // the same bits.
  ForwardOutput chained[2];
  for (int i = 0; i < 2; ++i) {
    ForwardBatch b;
    b.add_sequence({greedy_token(own.logits.data(), V)}, int32_t(T), i, s.blocks(i), true);
    const std::vector<float>& from = i == 0 ? own.hidden : result.draft_hidden;
    r.forward_mtp(b, from, chained[i]);
  }
  EXPECT_TRUE(same_bits(chained[0].logits.data(), chained[1].logits.data(), size_t(V)));
}

TEST(CudaSpeculation, AChainedMtpPassComputesTheSameBitsFromItsGraphAndEagerly) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner();
  cuda::CudaModelRunner& r = *runner;
  const int64_t V = r.config().vocab_size, D = r.config().hidden_size;
  MtpOverPrompt mtp(r);
  const int n = 30;
  ForwardOutput several;
  mtp.run(0, n, several);  // the drafter's first call (prompt rows: eager)
  auto pass_at = [&](int p, ForwardOutput& out) { mtp.run(p, 1, out); };  // a chained pass
  const StepGraphStats before = r.graph_stats();
  ForwardOutput captured, replayed, eager;
  pass_at(n, captured);
  pass_at(n, replayed);  // rewrites the same cache entry with the same bits
  r.set_eager(true);
  pass_at(n, eager);
  r.set_eager(false);
  const StepGraphStats after = r.graph_stats();
  EXPECT_EQ(after.mtp_graphs - before.mtp_graphs, 1) << "one capture for the one shape";
  EXPECT_EQ(after.mtp_graph_steps - before.mtp_graph_steps, 2u) << "captured, then replayed";
  ASSERT_EQ(captured.logits.size(), size_t(V));
  ASSERT_EQ(eager.logits.size(), size_t(V));
  EXPECT_TRUE(same_bits(captured.logits.data(), replayed.logits.data(), size_t(V)));
  EXPECT_TRUE(same_bits(captured.hidden.data(), replayed.hidden.data(), size_t(D)));
  EXPECT_TRUE(same_bits(captured.logits.data(), eager.logits.data(), size_t(V)))
      << "a graphed chained pass computes the eager one's bits";
  EXPECT_TRUE(same_bits(captured.hidden.data(), eager.hidden.data(), size_t(D)));
  // The same key at the next position (a new token, state and pool): nothing of the captured
  // step's values may stick in the graph.
  ForwardOutput graphed_next, eager_next;
  pass_at(n + 1, graphed_next);
  r.set_eager(true);
  pass_at(n + 1, eager_next);
  r.set_eager(false);
  EXPECT_EQ(r.graph_stats().mtp_graphs - before.mtp_graphs, 1) << "position n + 1 replays";
  EXPECT_EQ(r.graph_stats().mtp_graph_steps - before.mtp_graph_steps, 3u);
  EXPECT_TRUE(same_bits(graphed_next.logits.data(), eager_next.logits.data(), size_t(V)));
  EXPECT_TRUE(same_bits(graphed_next.hidden.data(), eager_next.hidden.data(), size_t(D)));
  EXPECT_FALSE(same_bits(graphed_next.logits.data(), captured.logits.data(), size_t(V)))
      << "the next position is a different row";
}

// Knows each request's answer and drafts it, wrong at every position divisible by 7.
class OracleDrafter : public Drafter {
 public:
  OracleDrafter(std::map<std::vector<int32_t>, std::vector<int32_t>> answers, int vocab)
      : answers_(std::move(answers)), vocab_(vocab) {}
  void draft(std::vector<DraftJob>& jobs) override {
    for (DraftJob& job : jobs)
      for (const auto& [prompt, full] : answers_) {
        const auto& t = *job.tokens;
        if (t.size() < prompt.size() || !std::equal(prompt.begin(), prompt.end(), t.begin()))
          continue;
        for (size_t p = t.size(); p < t.size() + size_t(job.want) && p < full.size(); ++p)
          job.drafts.push_back(p % 7 == 0 ? (full[p] + 1) % vocab_ : full[p]);
      }
  }

 private:
  std::map<std::vector<int32_t>, std::vector<int32_t>> answers_;
  int vocab_;
};

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

std::vector<GenerationRequest> requests(int count) {
  const int lens[] = {150, 70, 5, 33}, outs[] = {20, 26, 17, 24};
  std::vector<GenerationRequest> r;
  for (int i = 0; i < count; ++i) {
    GenerationRequest q;
    q.prompt = tokens_of(lens[i], i + 1);
    q.sampling.temperature = 0.0f;
    q.sampling.max_tokens = outs[i];
    q.sampling.ignore_eos = true;
    q.sampling.logprobs = true;  // bitwise evidence: equal ids could hide different logits
    r.push_back(std::move(q));
  }
  return r;
}

// Speculation one way (`a`, bitwise: tokens and logprobs) and the other (`b`, tokens) gave the
// output without speculation.
void expect_plain_output(const std::vector<Outcome>& a, const std::vector<Outcome>& b,
                         const std::vector<Outcome>& plain) {
  ASSERT_EQ(a.size(), plain.size());
  ASSERT_EQ(b.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(a[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_EQ(a[i].logprobs, plain[i].logprobs) << "request " << i;
    EXPECT_EQ(b[i].tokens, plain[i].tokens) << "request " << i;
  }
}

// A greedy request for `text` in the trained micro's byte vocabulary, with logprobs (bitwise
// evidence; the device checks drafts on the raw logits all the same).
GenerationRequest text_request(const char* text, int max_tokens) {
  return byte_texts::greedy_request(text, max_tokens, /*logprobs=*/true);
}

std::vector<Outcome> generate(ModelRunner& runner, int k, SpeculativeRollback rollback,
                              const std::vector<GenerationRequest>& reqs,
                              std::unique_ptr<Drafter> drafter, SpeculationCounters* counters,
                              bool draft_in_step = true, bool chain_in_step = true, int slots = 4) {
  SchedulerLimits l;
  l.speculative_draft_in_step = draft_in_step;
  l.speculative_chain_in_step = chain_in_step;
  l.max_num_seqs = slots;
  l.max_batch_size = slots;
  l.max_prefill_tokens = 64;  // prompts longer than a chunk prefill in pieces
  l.max_seq_len = 1024;
  l.speculative_tokens = k;
  l.speculative_rollback = rollback;
  Scheduler s(runner, l, std::move(drafter));
  std::vector<Outcome> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    GenerationRequest q = reqs[i];
    q.on_event = [&out, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) {
        out[i].tokens.push_back(t.id);
        out[i].logprobs.push_back(t.logprob);
      }
      // A failed request's output is cut short: say why, where a test would only see the cut.
      EXPECT_TRUE(e.finish != FinishReason::kError && e.finish != FinishReason::kDeviceFault)
          << "request " << i << " failed: " << e.error;
    };
    s.add(std::make_shared<RequestHandle>(i + 1), std::move(q));
  }
  for (int guard = 0; !s.idle() && guard < 10000; ++guard) s.step();
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.blocks().num_free(), runner.cache_geometry().num_blocks);
  if (counters) *counters = s.counters().speculation;
  return out;
}

TEST_P(CudaSpeculationRollback, GreedyWithDraftsEqualsGreedyWithoutAtC1AndC4) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner();
  cuda::CudaModelRunner& r = *runner;
  for (int count : {1, 4}) {
    const auto reqs = requests(count);
    // Without drafts: decode steps replayed from graphs, whatever the parameter.
    r.set_eager(false);
    const auto plain = generate(r, 0, rollback(), reqs, nullptr, nullptr);
    r.set_eager(!graphs());
    std::map<std::vector<int32_t>, std::vector<int32_t>> answers;
    for (size_t i = 0; i < reqs.size(); ++i) {
      std::vector<int32_t> full = reqs[i].prompt;
      full.insert(full.end(), plain[i].tokens.begin(), plain[i].tokens.end());
      answers[reqs[i].prompt] = full;
    }
    for (int k = 1; k <= 3; ++k)
      for (bool oracle : {false, true}) {
        SCOPED_TRACE("C" + std::to_string(count) + " k " + std::to_string(k) +
                     (oracle ? " oracle drafts" : " MTP drafts"));
        std::unique_ptr<Drafter> drafter;
        if (oracle) drafter = std::make_unique<OracleDrafter>(answers, r.config().vocab_size);
        SpeculationCounters c;
        const auto spec = generate(r, k, rollback(), reqs, std::move(drafter), &c);
        for (size_t i = 0; i < reqs.size(); ++i) {
          EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
          EXPECT_EQ(spec[i].logprobs, plain[i].logprobs) << "request " << i;
        }
        EXPECT_GT(c.verify_steps, 0u);
        if (oracle) {
          EXPECT_GT(c.accepted[0], 0u) << "right drafts are accepted";
        }
      }
  }
  expect_graphed_verify_steps(r);
  const StepGraphStats g = r.graph_stats();
  std::printf(
      "[ graphs   ] %d decode and %d verify graphs (%llu and %llu steps, %llu verify steps "
      "eager), %zu bytes of device memory\n",
      g.decode_graphs, g.verify_graphs, (unsigned long long)g.decode_graph_steps,
      (unsigned long long)g.verify_graph_steps, (unsigned long long)g.verify_eager_steps,
      g.graph_bytes);
}

// The drafter's first forward inside the verify step (StepSampling::draft_on_picks: the head,
// the device's greedy picks and the MTP module on them, in the step's graph): greedy output is
// the output without speculation either way, the drafts come from the step where the picks were
// committed, and they are the drafter's own closely enough to be accepted as often (the module
// runs there as decode rows, in its own forward as prompt rows: the bits may differ).
// On the trained micro (dummy weights draft nothing right), over text prompts in its byte
// vocabulary.
TEST_P(CudaSpeculationRollback, DraftsFromInsideTheVerifyStepChangeNoTokenAndAreAcceptedAsOften) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner(0, 64, cuda_test::kTrainedMicro);
  cuda::CudaModelRunner& r = *runner;
  r.set_eager(false);
  std::vector<GenerationRequest> reqs;
  for (const char* t : byte_texts::kProbes) reqs.push_back(text_request(t, 48));
  const auto plain = generate(r, 0, rollback(), reqs, nullptr, nullptr);
  r.set_eager(!graphs());
  for (int k : {1, 3}) {
    SCOPED_TRACE("k " + std::to_string(k));
    SpeculationCounters in_step, own;
    const DraftStepTimes t0 = r.draft_step_times();
    const auto a = generate(r, k, rollback(), reqs, nullptr, &in_step, true);
    const DraftStepTimes t1 = r.draft_step_times();
    const auto b = generate(r, k, rollback(), reqs, nullptr, &own, false);
    expect_plain_output(a, b, plain);
    // The runner timed the steps that ran drafts (DraftStepTimes), and no other; the step
    // proper lies inside the device's span. (The device's span is not bounded by the host's
    // time in the runner: a chaining step's MTP passes run while the host commits its main
    // rows and builds the next step, ModelRunner::collect_main.)
    if (in_step.step_drafts > 0) {
      EXPECT_GT(t1.steps, t0.steps);
    }
    EXPECT_LE(t1.steps - t0.steps, in_step.verify_steps);
    EXPECT_EQ(r.draft_step_times().steps, t1.steps);
    if (t1.steps > t0.steps) {
      const double device = t1.device_seconds - t0.device_seconds;
      const double run = t1.run_seconds - t0.run_seconds;
      EXPECT_GT(run, 0.0);
      EXPECT_GT(t1.wait_seconds, t0.wait_seconds);
      EXPECT_LE(run, device);
      // The device's wait for the layers' first launch (the graph's first node) is part of the
      // step proper.
      EXPECT_GE(t1.lag_seconds, t0.lag_seconds);
      EXPECT_GE(t1.idle_seconds, t0.idle_seconds);  // the stream orders the two events
      EXPECT_LE(t1.lag_seconds - t0.lag_seconds, run);
      // The host's pieces before the launch are parts of its time in submit.
      const double pieces = (t1.load_seconds + t1.plan_seconds + t1.launch_seconds) -
                            (t0.load_seconds + t0.plan_seconds + t0.launch_seconds);
      EXPECT_GT(t1.launch_seconds, t0.launch_seconds);
      EXPECT_LE(pieces, t1.host_seconds - t0.host_seconds);
    }
    EXPECT_EQ(own.step_drafts, 0u);
    if (rollback() == SpeculativeRollback::kRecords) {
      EXPECT_GT(in_step.step_drafts, in_step.verify_steps / 2);
    }
    const double accepted_in_step = double(in_step.accepted[0]) / double(in_step.drafted[0]);
    const double accepted_own = double(own.accepted[0]) / double(own.drafted[0]);
    std::printf(
        "[ drafts   ] k %d: %llu of %llu verify steps drafted in the step; first-draft "
        "acceptance %.3f in the step, %.3f by the drafter's own forward\n",
        k, (unsigned long long)in_step.step_drafts, (unsigned long long)in_step.verify_steps,
        accepted_in_step, accepted_own);
    EXPECT_GT(accepted_own, 0.2) << "the trained MTP head drafts right often enough to compare";
    EXPECT_NEAR(accepted_in_step, accepted_own, 0.1);
  }
  if (graphs()) expect_graphed_verify_steps(r);
}

// Prompts in the trained micro's byte vocabulary on which its drafts chain (copying, a lookup, a
// JSON object, prose): the chain tests below share them.
constexpr const char* kChainTexts[] = {
    "Task: repeat the following text exactly.\nThe river runs past the old mill.\n",
    "The code of item K7 is 40213377. The code of item B2 is 99120456. The code of item K7 is ",
    "Task: output one JSON object with the fields name and age.\n{\"name\": \"Ada\", ",
    "Continue this text in the same style. The morning was cold and "};

// The later drafts chained inside the verify step too (StepSampling::draft_chain, draft_chain.h:
// the accepted row found on the device, the module's later passes run from it in the step's
// graph): greedy output is the output without speculation, and the chains are the drafter's own
// chained passes bit for bit (the same module over one-row decode rows at the same positions), so
// every draft position is drafted and accepted exactly as often with chains in the step as
// without, at C1 and C4 (steps of up to kMaxChainedSlices slices take chains). On the trained
// micro, whose drafts are often right, over the prompts of the test above.
TEST_P(CudaSpeculationRollback, ChainsFromInsideTheVerifyStepAreTheDraftersOwnDrafts) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner(0, 64, cuda_test::kTrainedMicro);
  cuda::CudaModelRunner& r = *runner;
  r.set_eager(false);
  std::vector<GenerationRequest> reqs;
  for (const char* t : kChainTexts)
    reqs.push_back(text_request(t, 40 - 8 * int(reqs.size())));  // at C4 the first ends alone
  for (int count : {1, 4}) {
    const std::vector<GenerationRequest> some(reqs.begin(), reqs.begin() + count);
    const auto plain = generate(r, 0, rollback(), some, nullptr, nullptr);
    r.set_eager(!graphs());
    for (int k : {2, 3}) {
      SCOPED_TRACE("C" + std::to_string(count) + " k " + std::to_string(k));
      SpeculationCounters chained, own;
      const DraftStepTimes t0 = r.draft_step_times();
      const auto a = generate(r, k, rollback(), some, nullptr, &chained, true, true);
      const DraftStepTimes t1 = r.draft_step_times();
      const auto b = generate(r, k, rollback(), some, nullptr, &own, true, false);
      expect_plain_output(a, b, plain);
      EXPECT_EQ(own.step_chains, 0u);
      // The host's time from a chaining step's main rows to the next step's submit is counted
      // where steps were committed from their main rows (collect_main) and the next one drafts,
      // and only there; the main rows come before the step proper ends.
      if (rollback() == SpeculativeRollback::kRecords && chained.step_chains > 1) {
        EXPECT_GT(t1.between_seconds, t0.between_seconds);
        EXPECT_GT(t1.main_seconds, t0.main_seconds);
        EXPECT_LT(t1.main_seconds - t0.main_seconds, t1.run_seconds - t0.run_seconds);
      }
      EXPECT_EQ(r.draft_step_times().between_seconds, t1.between_seconds);
      if (rollback() == SpeculativeRollback::kRecords) {
        // At C4, the steps after the other three have ended.
        EXPECT_GT(chained.step_chains, count <= kMaxChainedSlices ? chained.verify_steps / 2 : 0u);
      }
      for (int i = 0; i < k; ++i) {
        EXPECT_EQ(chained.drafted[size_t(i)], own.drafted[size_t(i)]) << "position " << i;
        EXPECT_EQ(chained.accepted[size_t(i)], own.accepted[size_t(i)]) << "position " << i;
      }
      std::printf(
          "[ chains   ] C%d k %d: %llu of %llu verify steps chained in the step; "
          "acceptance by position %.3f %.3f %.3f\n",
          count, k, (unsigned long long)chained.step_chains,
          (unsigned long long)chained.verify_steps,
          double(chained.accepted[0]) / double(std::max<uint64_t>(1, chained.drafted[0])),
          double(chained.accepted[1]) / double(std::max<uint64_t>(1, chained.drafted[1])),
          double(chained.accepted[2]) / double(std::max<uint64_t>(1, chained.drafted[2])));
    }
    r.set_eager(false);
  }
  if (graphs()) expect_graphed_verify_steps(r);
}

// Eight slices of k = 4 are 40 verify rows, more than the decode kernels take (kDecodeMaxRows):
// such a step runs without its draft rows and the scheduler, which asked for a chain, must still
// get its tokens (session 38: speculation_bench at C8 k = 4 stopped the process in collect_main,
// where a server would have stopped). Greedy output is the output without speculation, and the
// steps of fewer slices as the replies end still draft in the step.
TEST(CudaSpeculation, EightSlicesOfFourDraftsAreMoreRowsThanAStepDraftsAndStillVerify) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner(0, 64, cuda_test::kTrainedMicro, /*slots=*/8);
  cuda::CudaModelRunner& r = *runner;
  r.set_eager(false);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 8; ++i) {
    reqs.push_back(text_request(kChainTexts[i % 4], 24 + 4 * i));
    reqs.back().sampling.ignore_eos = true;
  }
  const auto plain = generate(r, 0, SpeculativeRollback::kRecords, reqs, nullptr, nullptr, true,
                              true, /*slots=*/8);
  SpeculationCounters c;
  const auto spec = generate(r, 4, SpeculativeRollback::kRecords, reqs, nullptr, &c, true, true,
                             /*slots=*/8);
  ASSERT_EQ(spec.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_EQ(spec[i].logprobs, plain[i].logprobs) << "request " << i;
  }
  EXPECT_GT(c.verify_steps, 0u);
  EXPECT_GT(c.step_chains, 0u) << "the steps of at most 6 slices (30 rows) chain in the step";
}

// Canonical verify at the bench's scale (session 32: with three launch cuts, 9 of 20 cells of
// speculation_bench gave other outputs at k = 2 and 3 than at k = 0, a race the tests above, one
// short run each, did not meet; one sequence raced too): four 128-token greedy replies on the
// trained micro, together (C4) and each alone (C1), k = 2 and 3 with chains in the step, five runs
// each from graphs, every one bit for bit the output without speculation.
TEST(CudaSpeculation, GreedyWithChainsEqualsGreedyWithoutOverRepeatedLongReplies) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner(0, 64, cuda_test::kTrainedMicro);
  cuda::CudaModelRunner& r = *runner;
  r.set_eager(false);
  std::vector<GenerationRequest> reqs;
  for (const char* t : kChainTexts) {
    reqs.push_back(text_request(t, 128));
    reqs.back().sampling.ignore_eos = true;  // every reply the full 128 tokens
  }
  const auto plain = generate(r, 0, SpeculativeRollback::kRecords, reqs, nullptr, nullptr);
  for (int k : {2, 3})
    for (int run = 0; run < 5; ++run) {
      SCOPED_TRACE("k " + std::to_string(k) + " run " + std::to_string(run));
      SpeculationCounters c;
      const auto spec = generate(r, k, SpeculativeRollback::kRecords, reqs, nullptr, &c);
      ASSERT_EQ(spec.size(), plain.size());
      for (size_t i = 0; i < plain.size(); ++i) {
        EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "C4, request " << i;
        EXPECT_EQ(spec[i].logprobs, plain[i].logprobs) << "C4, request " << i;
        const auto alone = generate(r, k, SpeculativeRollback::kRecords, {reqs[i]}, nullptr, &c);
        ASSERT_EQ(alone.size(), 1u);
        EXPECT_EQ(alone[0].tokens, plain[i].tokens) << "C1, request " << i;
        EXPECT_EQ(alone[0].logprobs, plain[i].logprobs) << "C1, request " << i;
      }
      EXPECT_GT(c.step_chains, 0u) << "chains ran in the verify steps";
    }
  const StepGraphStats g = r.graph_stats();
  EXPECT_GT(g.verify_graph_steps, 0u);
}

}  // namespace
}  // namespace sparkglm
