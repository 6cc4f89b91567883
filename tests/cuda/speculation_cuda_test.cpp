// Speculative decoding on the CUDA runner (docs/speculative-decoding.md, section "CUDA"), on
// tinyglm with dummy weights:
//  - a verify slice's rows (widths 2..5, beside another verify slice of another width) compute
//    the logits and hidden states of one-row decode steps of the same tokens, bit for bit, in
//    forward() and in submit/collect, while the decode steps replay CUDA graphs and the verify
//    step runs eagerly;
//  - rollback: after a rejected draft, the KDA state (every layer's recurrent state and conv
//    history, read through a snapshot) and the next row's logits equal the non-speculative run's,
//    bit for bit, with state records (resume_record) and with recompute (record_before_row, the
//    accepted rows run again); without the resume they differ;
//  - forward_mtp over several rows of a sequence and then one row (the drafter's two calls)
//    returns one hidden state and one logit row per asked row, close to the MTP module over the
//    same rows in one call;
//  - through the scheduler, greedy output with k = 1, 2, 3 drafts (the MTP module's, and an
//    oracle's that are mostly right) is the output without speculation, tokens and logprobs, at
//    C1 and C4, with either rollback; every block returns to the pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/model/config.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/speculation/drafter.h"
#include "engine/runtime/speculation/speculative_rollback.h"
#include "engine/runtime/speculation/speculator.h"
#include "tests/cuda/cuda_test_support.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

// tinyglm with four slots, state records for k = 4 drafts (or widths up to 5) and decode slices
// of up to 7 rows (2k + 1 for k = 3 with recompute).
std::unique_ptr<cuda::CudaModelRunner> spec_runner(int snapshots = 0) {
  const ModelConfig c = preset_config("tinyglm");
  cuda::CudaRunnerOptions o;
  o.num_blocks = 4 * 64;
  o.block_size = 16;
  o.num_state_slots = 4;
  o.num_snapshots = snapshots;
  o.state_records = 5;
  o.decode_slice_rows = 7;
  o.max_rows = 256 + 4 * 7;
  o.max_seq_len = 1024;
  return std::make_unique<cuda::CudaModelRunner>(
      c, cuda::DeviceWeights::generate(c, kDefaultDummySeed), o);
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

// Two sequences, A (slot 0, 40-token prompt) and B (slot 1, 23 tokens), prefilled afresh.
struct TwoSequences {
  std::vector<int32_t> prompt_a = tokens_of(40, 1), prompt_b = tokens_of(23, 2);
  std::vector<int32_t> table_a = table(0, 4), table_b = table(10, 4);
  void prefill(ModelRunner& r) const {
    ForwardBatch b;
    b.add_sequence(prompt_a, 0, 0, table_a);
    b.seqs.back().decode = false;
    b.add_sequence(prompt_b, 0, 1, table_b);
    b.seqs.back().decode = false;
    ForwardOutput out;
    r.forward(b, out);
  }
};

TEST(CudaSpeculation, AVerifyRowComputesTheDecodeRowsBitsAtWidthsTwoToFive) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner();
  cuda::CudaModelRunner& r = *runner;
  const int64_t V = r.config().vocab_size, D = r.config().hidden_size;
  const TwoSequences s;
  for (int w = 2; w <= 5; ++w) {
    SCOPED_TRACE("width " + std::to_string(w));
    const std::vector<int32_t> rows_a = tokens_of(w, 10 + w), rows_b = tokens_of(w - 1, 20 + w);
    // Non-speculative: one decode row per sequence and step (graphs replayed).
    s.prefill(r);
    std::vector<float> ref_logits_a, ref_hidden_a, ref_logits_b, ref_hidden_b;
    for (int i = 0; i < w; ++i) {
      ForwardBatch b;
      b.add_sequence({rows_a[size_t(i)]}, 40 + i, 0, s.table_a);
      if (i < w - 1) b.add_sequence({rows_b[size_t(i)]}, 23 + i, 1, s.table_b);
      ForwardOutput out;
      r.forward(b, out);
      ref_logits_a.insert(ref_logits_a.end(), out.logits.begin(), out.logits.begin() + V);
      ref_hidden_a.insert(ref_hidden_a.end(), out.hidden.begin(), out.hidden.begin() + D);
      if (i < w - 1) {
        ref_logits_b.insert(ref_logits_b.end(), out.logits.begin() + V, out.logits.end());
        ref_hidden_b.insert(ref_hidden_b.end(), out.hidden.begin() + D, out.hidden.end());
      }
    }
    // Speculative: one step, A's verify slice of w rows beside B's of w - 1, recording states.
    ForwardBatch verify;
    add_decode(verify, rows_a, 40, 0, s.table_a);
    verify.seqs.back().record_states = true;
    add_decode(verify, rows_b, 23, 1, s.table_b);
    verify.seqs.back().record_states = true;
    for (int pass = 0; pass < 2; ++pass) {  // forward(), then submit/collect
      SCOPED_TRACE(pass == 0 ? "forward" : "submit/collect");
      s.prefill(r);
      std::vector<float> logits, hidden;
      if (pass == 0) {
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
      ASSERT_EQ(logits.size(), size_t((2 * w - 1) * V));
      ASSERT_EQ(hidden.size(), size_t((2 * w - 1) * D));
      for (int i = 0; i < w; ++i) {
        EXPECT_TRUE(same_bits(&logits[size_t(i * V)], &ref_logits_a[size_t(i * V)], size_t(V)))
            << "A row " << i;
        EXPECT_TRUE(same_bits(&hidden[size_t(i * D)], &ref_hidden_a[size_t(i * D)], size_t(D)))
            << "A row " << i;
      }
      for (int i = 0; i < w - 1; ++i) {
        EXPECT_TRUE(
            same_bits(&logits[size_t((w + i) * V)], &ref_logits_b[size_t(i * V)], size_t(V)))
            << "B row " << i;
        EXPECT_TRUE(
            same_bits(&hidden[size_t((w + i) * D)], &ref_hidden_b[size_t(i * D)], size_t(D)))
            << "B row " << i;
      }
    }
  }
  EXPECT_GT(r.graph_replays(), 0u) << "the decode reference ran in graphs";
}

// The KDA state of slot 0 of every layer, through snapshot 0 (saved by the slice).
std::vector<std::byte> saved_state(cuda::CudaModelRunner& r) {
  std::vector<std::byte> bytes(r.host_snapshot_bytes());
  r.copy_snapshot_to_host(0, bytes.data());
  return bytes;
}

class CudaSpeculationRollback : public ::testing::TestWithParam<SpeculativeRollback> {};

INSTANTIATE_TEST_SUITE_P(Rollback, CudaSpeculationRollback,
                         ::testing::Values(SpeculativeRollback::kRecords,
                                           SpeculativeRollback::kRecompute),
                         [](const ::testing::TestParamInfo<SpeculativeRollback>& i) {
                           return std::string(speculative_rollback_name(i.param));
                         });

// A verify slice of 4 rows [t0..t3] at P; rows 0..r accepted, then token x at P + r + 1.
TEST_P(CudaSpeculationRollback, AfterARejectedDraftTheStateIsTheNonSpeculativeRunsBitForBit) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const bool records = GetParam() == SpeculativeRollback::kRecords;
  const auto runner = spec_runner(/*snapshots=*/1);
  cuda::CudaModelRunner& run = *runner;
  const int64_t V = run.config().vocab_size;
  const TwoSequences s;
  const int P = 40, w = 4;
  const std::vector<int32_t> drafts = tokens_of(w, 7);
  const int32_t x = 77;
  for (int r = 0; r < w; ++r) {
    SCOPED_TRACE("rows accepted: " + std::to_string(r + 1));
    // Non-speculative: t0..tr, then x, one row a step; the state after x saved.
    s.prefill(run);
    for (int i = 0; i <= r; ++i) {
      ForwardBatch b;
      b.add_sequence({drafts[size_t(i)]}, P + i, 0, s.table_a);
      ForwardOutput out;
      run.forward(b, out);
    }
    ForwardBatch last;
    last.add_sequence({x}, P + r + 1, 0, s.table_a);
    last.seqs.back().save_snapshot = 0;
    ForwardOutput ref;
    run.forward(last, ref);
    const std::vector<std::byte> ref_state = saved_state(run);

    // Speculative: the verify slice, then x resuming from the last accepted row.
    for (bool resume : {true, false}) {
      s.prefill(run);
      ForwardBatch verify;
      add_decode(verify, drafts, P, 0, s.table_a);
      if (records) {
        verify.seqs.back().record_states = true;
      } else {
        verify.seqs.back().record_before_row = 0;
      }
      ForwardOutput out;
      run.forward(verify, out);
      ForwardBatch next;
      if (records) {
        next.add_sequence({x}, P + r + 1, 0, s.table_a);
        next.seqs.back().resume_record = resume ? r : -1;
      } else {
        // The accepted rows run again (no logits), then x; the state before x kept in record 0.
        std::vector<int32_t> rows(drafts.begin(), drafts.begin() + r + 1);
        rows.push_back(x);
        next.add_sequence(rows, P, 0, s.table_a, /*want_logits=*/true);
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
}

TEST(CudaSpeculation, ForwardMtpOverSeveralRowsThenOneRowFollowsTheModule) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  const auto runner = spec_runner();
  cuda::CudaModelRunner& r = *runner;
  const int64_t V = r.config().vocab_size, D = r.config().hidden_size;
  const TwoSequences s;
  // The main model's hidden states of A's prompt rows (all logits asked for).
  ForwardBatch model;
  model.add_sequence(s.prompt_a, 0, 0, s.table_a, true, /*all_logits=*/true);
  model.seqs.back().decode = false;
  ForwardOutput h;
  r.forward(model, h);
  ASSERT_EQ(h.hidden.size(), size_t(40 * D));
  const int n = 30;  // rows 0..n-1 on their next tokens, then row n alone
  auto mtp_batch = [&](int first, int rows) {
    ForwardBatch b;
    b.add_sequence({s.prompt_a.begin() + first + 1, s.prompt_a.begin() + first + 1 + rows}, first,
                   0, s.table_a, true);
    b.seqs.back().decode = rows == 1;
    return b;
  };
  auto hidden_of = [&](int first, int rows) {
    return std::vector<float>(h.hidden.begin() + first * D, h.hidden.begin() + (first + rows) * D);
  };
  ForwardOutput several, one, whole;
  r.forward_mtp(mtp_batch(0, n), hidden_of(0, n), several);
  EXPECT_EQ(several.logits.size(), size_t(V));
  EXPECT_EQ(several.hidden.size(), size_t(D));
  r.forward_mtp(mtp_batch(n, 1), hidden_of(n, 1), one);
  ASSERT_EQ(one.logits.size(), size_t(V));
  ASSERT_EQ(one.hidden.size(), size_t(D));
  r.forward_mtp(mtp_batch(0, n + 1), hidden_of(0, n + 1), whole);
  ASSERT_EQ(whole.logits.size(), size_t(V));
  // Row n as a decode row after the rows before it, against row n inside a prefill of them all:
  // the two paths round differently, but compute the same thing.
  EXPECT_LT(cuda_test::nmse(one.logits, whole.logits), 1e-2);
  EXPECT_LT(cuda_test::nmse(one.hidden, whole.hidden), 1e-2);
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

std::vector<Outcome> generate(ModelRunner& runner, int k, SpeculativeRollback rollback,
                              const std::vector<GenerationRequest>& reqs,
                              std::unique_ptr<Drafter> drafter, SpeculationCounters* counters) {
  SchedulerLimits l;
  l.max_num_seqs = 4;
  l.max_batch_size = 4;
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
    const auto plain = generate(r, 0, GetParam(), reqs, nullptr, nullptr);
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
        const auto spec = generate(r, k, GetParam(), reqs, std::move(drafter), &c);
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
}

}  // namespace
}  // namespace sparkglm
