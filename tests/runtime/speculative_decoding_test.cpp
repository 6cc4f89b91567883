// Speculative decoding (engine/runtime/speculation/speculator.h) on tinyglm-micro: greedy output
// with k drafts per step is the output without speculation, token for token and logprob for
// logprob (bitwise: a verify row computes what a decode row computes), at C1 and C4, whether the
// drafts are mostly wrong (the dummy model's MTP head) or mostly right (an oracle drafter that
// knows the answer and errs where told), through split prefill, stop tokens, max_tokens,
// preemption, the prefix cache and an output grammar, with either rollback (state records or
// recompute; a rollback that never restores the state fails the same checks); rollback returns
// every block, and requests that opt out are not drafted for.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/model/model_loader.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/speculation/mtp_drafter.h"
#include "engine/text/grammar/compiled_grammar.h"
#include "tests/support/build_paths.h"
#include "tests/support/byte_texts.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 13 + salt * 29 + 3) % 256;
  return t;
}

GenerationRequest greedy(int prompt_len, int salt, int max_tokens) {
  GenerationRequest r;
  r.prompt = prompt_of(prompt_len, salt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = true;  // bitwise evidence: equal ids could hide different logits
  return r;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  FinishReason finish = FinishReason::kNone;
  std::string error;
};

// Knows every request's answer (prompt -> prompt + output) and drafts it, except that the draft
// for every position divisible by `wrong_every` is off by one.
class OracleDrafter : public Drafter {
 public:
  OracleDrafter(std::map<std::vector<int32_t>, std::vector<int32_t>> answers, int wrong_every,
                int vocab)
      : answers_(std::move(answers)), wrong_every_(wrong_every), vocab_(vocab) {}
  void draft(std::vector<DraftJob>& jobs) override {
    for (DraftJob& job : jobs) {
      ++observed_rows;
      for (const auto& [prompt, full] : answers_) {
        const auto& t = *job.tokens;
        if (t.size() < prompt.size() || !std::equal(prompt.begin(), prompt.end(), t.begin()))
          continue;
        for (size_t p = t.size(); p < t.size() + size_t(job.want) && p < full.size(); ++p)
          job.drafts.push_back(p % size_t(wrong_every_) == 0 ? (full[p] + 1) % vocab_ : full[p]);
      }
    }
  }
  int observed_rows = 0;

 private:
  std::map<std::vector<int32_t>, std::vector<int32_t>> answers_;
  int wrong_every_, vocab_;
};

class SpeculativeDecodingTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  const LoadedModel& micro = testing::micro_model();

  // A runner with the KDA state records k drafts need under `rollback`.
  std::unique_ptr<cpu::CpuModelRunner> runner_for(int blocks, int k, SpeculativeRollback rollback,
                                                  int snapshots = 0) {
    return runner(blocks, speculative_state_records(k, rollback), snapshots);
  }
  std::unique_ptr<cpu::CpuModelRunner> runner(int blocks, int records, int snapshots = 0) {
    cpu::CpuRunnerOptions o;
    o.num_blocks = blocks;
    o.block_size = 16;
    o.num_state_slots = 4;
    o.num_snapshots = snapshots;
    o.state_records = records;
    return std::make_unique<cpu::CpuModelRunner>(micro.config, micro.weights, o, pool);
  }
  // Runs the requests together (C = requests.size()) to the end.
  std::vector<Outcome> run(ModelRunner& r, SchedulerLimits limits,
                           const std::vector<GenerationRequest>& requests,
                           std::unique_ptr<Drafter> drafter = nullptr) {
    scheduler = std::make_unique<Scheduler>(r, limits, std::move(drafter));
    return run_on(*scheduler, requests);
  }
  // Runs the requests together on an existing scheduler.
  std::vector<Outcome> run_on(Scheduler& s, const std::vector<GenerationRequest>& requests) {
    std::vector<Outcome> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      GenerationRequest q = requests[i];
      q.on_event = [&out, i](const RequestEvent& e) {
        for (const auto& t : e.tokens) {
          out[i].tokens.push_back(t.id);
          out[i].logprobs.push_back(t.logprob);
        }
        if (e.finish != FinishReason::kNone) out[i].finish = e.finish;
        out[i].error += e.error;
      };
      s.add(std::make_shared<RequestHandle>(i + 1), std::move(q));
    }
    for (int guard = 0; !s.idle() && guard < 100000; ++guard) s.step();
    EXPECT_TRUE(s.idle());
    return out;
  }
  static SchedulerLimits limits_with(int k,
                                     SpeculativeRollback rollback = SpeculativeRollback::kRecords) {
    SchedulerLimits l;
    l.max_prefill_tokens = 64;  // prompts longer than a chunk prefill in pieces
    l.speculative_tokens = k;
    l.speculative_rollback = rollback;
    return l;
  }
  static void expect_same(const std::vector<Outcome>& a, const std::vector<Outcome>& b,
                          const std::string& what) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].tokens, b[i].tokens) << what << ", request " << i;
      EXPECT_EQ(a[i].logprobs, b[i].logprobs) << what << ", request " << i;
      EXPECT_EQ(a[i].finish, b[i].finish) << what << ", request " << i << ": " << a[i].error;
    }
  }
  std::vector<GenerationRequest> four() const {
    const int lens[] = {150, 70, 5, 33}, outs[] = {20, 26, 17, 24};
    std::vector<GenerationRequest> r;
    for (int i = 0; i < 4; ++i) r.push_back(greedy(lens[i], i + 1, outs[i]));
    return r;
  }
  std::map<std::vector<int32_t>, std::vector<int32_t>> answers(
      const std::vector<GenerationRequest>& requests, const std::vector<Outcome>& outs) const {
    std::map<std::vector<int32_t>, std::vector<int32_t>> a;
    for (size_t i = 0; i < requests.size(); ++i) {
      std::vector<int32_t> full = requests[i].prompt;
      full.insert(full.end(), outs[i].tokens.begin(), outs[i].tokens.end());
      a[requests[i].prompt] = full;
    }
    return a;
  }
  std::unique_ptr<Scheduler> scheduler;
};

// The tests that check output, once per rollback.
class SpeculativeRollbackTest : public SpeculativeDecodingTest,
                                public ::testing::WithParamInterface<SpeculativeRollback> {
 protected:
  SpeculativeRollback rollback() const { return GetParam(); }
  std::unique_ptr<cpu::CpuModelRunner> runner_k(int blocks, int k, int snapshots = 0) {
    return runner_for(blocks, k, rollback(), snapshots);
  }
  SchedulerLimits limits_k(int k) const { return limits_with(k, rollback()); }
  // The requests with the drafter's first forward inside the steps (draft_on_picks, mtp_next:
  // index 1, counters `with`) and without (index 0, `without`), each on a fresh runner.
  struct InStepOrNot {
    std::vector<Outcome> out[2];
    SpeculationCounters with{}, without{};
  };
  InStepOrNot in_step_or_not(int k, const std::vector<GenerationRequest>& requests) {
    InStepOrNot r;
    for (bool in_step : {true, false}) {
      auto runner = runner_k(64, k);
      SchedulerLimits l = limits_k(k);
      l.speculative_draft_in_step = in_step;
      r.out[in_step] = run(*runner, l, requests);
      (in_step ? r.with : r.without) = scheduler->counters().speculation;
      EXPECT_EQ(scheduler->blocks().num_free(), 64) << "k=" << k;
    }
    return r;
  }
};

INSTANTIATE_TEST_SUITE_P(Rollback, SpeculativeRollbackTest,
                         ::testing::Values(SpeculativeRollback::kRecords,
                                           SpeculativeRollback::kRecompute),
                         [](const ::testing::TestParamInfo<SpeculativeRollback>& i) {
                           return std::string(speculative_rollback_name(i.param));
                         });

// Forwards to a runner but drops every slice's resume_record: a rollback that never restores
// the KDA state, which the output checks must catch.
class NoRestoreRunner : public ModelRunner {
 public:
  explicit NoRestoreRunner(ModelRunner& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  CacheGeometry cache_geometry() const override { return inner_.cache_geometry(); }
  void forward(const ForwardBatch& batch, ForwardOutput& out) override {
    ForwardBatch broken = batch;
    for (SequenceSlice& s : broken.seqs) {
      restores_dropped += s.resume_record >= 0;
      s.resume_record = -1;
    }
    inner_.forward(broken, out);
  }
  void forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                   ForwardOutput& out) override {
    inner_.forward_mtp(batch, hidden, out);
  }
  int restores_dropped = 0;

 private:
  ModelRunner& inner_;
};

TEST_P(SpeculativeRollbackTest, GreedyWithMtpDraftsEqualsGreedyWithoutAtC1AndC4) {
  const auto requests = four();
  auto plain_runner = runner(64, 0);
  const auto plain = run(*plain_runner, limits_with(0), requests);
  for (int k = 1; k <= kMaxSpeculativeTokens; ++k) {
    auto r = runner_k(64, k);
    expect_same(run(*r, limits_k(k), requests), plain, "C4, k=" + std::to_string(k));
    const SpeculationCounters c = scheduler->counters().speculation;
    EXPECT_GT(c.verify_steps, 0u) << "k=" << k;
    EXPECT_GT(c.drafted[size_t(k - 1)], 0u) << "k=" << k;  // every draft position was used
    EXPECT_EQ(scheduler->blocks().num_free(), 64) << "k=" << k;
    for (size_t i = 0; i < requests.size(); ++i) {
      auto alone = runner_k(64, k);
      expect_same(run(*alone, limits_k(k), {requests[i]}), {plain[i]},
                  "C1, k=" + std::to_string(k));
    }
  }
}

// A verify step of verify slices only runs the MTP module on its own greedy picks
// (StepSampling::draft_on_picks, here through ModelRunner's default pipeline): the drafter then
// starts from the step's row. Those rows are what its own first forward computes, so the drafts,
// their acceptance and the output are the same as with the drafter's forward alone.
TEST_P(SpeculativeRollbackTest, DraftsFromInsideTheVerifyStepAreTheDraftersOwn) {
  const auto requests = four();
  for (int k : {1, 3}) {
    const auto [out, with, without] = in_step_or_not(k, requests);
    expect_same(out[1], out[0], "k=" + std::to_string(k));
    EXPECT_EQ(with.drafted, without.drafted) << "k=" << k;
    EXPECT_EQ(with.accepted, without.accepted) << "k=" << k;
    EXPECT_EQ(with.verify_tokens, without.verify_tokens) << "k=" << k;
    EXPECT_EQ(without.step_drafts, 0u) << "k=" << k;
    // Rollback by recompute replays rows after a rejection: those steps draft the old way.
    if (rollback() == SpeculativeRollback::kRecords) {
      EXPECT_GT(with.step_drafts, with.verify_steps / 2) << "k=" << k;
    }
  }
}

// A step of prompt rows alone runs the MTP module over them inside it (StepSampling::mtp_next,
// here the default pipeline's ModelRunner::forward_with_prompt_drafts): the module's cache is
// written at every prompt row with no forward of the drafter's own, only the row that samples
// brings logits back, and the first draft comes from that row. Those rows are what the drafter's
// first forward over the prompt computes, so the drafts, their acceptance and the output are the
// same as without; a sampled request, whose draw need not be the greedy pick the row took, has
// that one row run again by the drafter, with the same result.
TEST_P(SpeculativeRollbackTest, DraftsFromAPromptsOwnStepAreTheDraftersOwn) {
  std::vector<GenerationRequest> requests = four();  // prompts of 150, 70, 5, 33: 64-row chunks
  GenerationRequest sampled = greedy(90, 9, 24);
  sampled.sampling.temperature = 0.9f;
  sampled.sampling.seed = 17;
  sampled.sampling.logprobs = false;  // drafted (a rejection draws no logprob)
  requests.push_back(sampled);
  const int k = 2;
  for (size_t alone = 0; alone <= requests.size(); ++alone) {  // each alone, then all together
    const std::vector<GenerationRequest> some =
        alone < requests.size() ? std::vector<GenerationRequest>{requests[alone]} : requests;
    SCOPED_TRACE(alone < requests.size() ? "C1, request " + std::to_string(alone) : "C5");
    const auto [out, with, without] = in_step_or_not(k, some);
    expect_same(out[1], out[0], "with the prompt's drafts from its step");
    EXPECT_EQ(with.drafted, without.drafted);
    EXPECT_EQ(with.accepted, without.accepted);
    EXPECT_EQ(without.prompt_drafts, 0u);
    if (alone < 4) {
      // Its prompt's last chunk drafted in its step (the chunks before it wrote the cache there).
      EXPECT_EQ(with.prompt_drafts, 1u);
    } else if (alone > requests.size() - 1) {
      EXPECT_GT(with.prompt_drafts, 0u);  // the prompts prefilled in steps of prompts alone
    }
  }
}

// Records the rows of every decode slice the runner computes (each verify slice's last token and
// its drafts, as the runner sees them after taking tokens from an earlier step), per state slot,
// and counts the steps whose main rows were collected before their drafts.
class VerifyRowRecorder : public cpu::CpuModelRunner {
 public:
  using cpu::CpuModelRunner::CpuModelRunner;
  void forward(const ForwardBatch& batch, ForwardOutput& out) override {
    for (const SequenceSlice& s : batch.seqs) {
      if (!s.decode) continue;
      std::vector<int32_t>& d = rows[s.state_slot];
      d.insert(d.end(), batch.tokens.begin() + s.first_row,
               batch.tokens.begin() + s.first_row + s.num_rows);
      d.push_back(-1);  // the end of one slice
    }
    cpu::CpuModelRunner::forward(batch, out);
  }
  void collect_main(StepResult& main) override {
    ++early_steps;
    cpu::CpuModelRunner::collect_main(main);
  }
  std::map<int32_t, std::vector<int32_t>> rows;
  int early_steps = 0;
};

// The later drafts chained by the runner inside the verify step (StepSampling::draft_chain; on
// the CPU the default pipeline's ModelRunner::draft_chain, as the CUDA runner's draft_chain.h does
// on the device): the output is the output without speculation, the speculator takes the chains
// (in steps of one slice, SchedulerLimits::speculative_chain_slices 1: at C4 once one request is
// left; in steps of up to four, every step at C4), committing each step from its main rows and
// building the next before the chains arrive (ModelRunner::collect_main), and every verify slice
// checks the very drafts, slice by slice, that the drafter makes when it chains itself.
TEST_P(SpeculativeRollbackTest, ChainsFromTheVerifyStepAreTheDraftersOwnDrafts) {
  const auto all = four();
  for (size_t count : {size_t(1), size_t(4)}) {
    const std::vector<GenerationRequest> requests(all.begin(), all.begin() + long(count));
    auto plain_runner = runner(64, 0);
    const auto plain = run(*plain_runner, limits_with(0), requests);
    for (int k : {2, 3}) {
      SCOPED_TRACE("C" + std::to_string(count) + " k " + std::to_string(k));
      // Chains in steps of one slice, of up to four (as the default, 8, at C4), and none.
      struct Way {
        const char* name;
        bool chains;
        int slices;
        SpeculationCounters counters;
        std::map<int32_t, std::vector<int32_t>> rows;
        int early_steps;
      };
      Way ways[] = {{"chains in steps of one slice", true, 1, {}, {}, 0},
                    {"chains in steps of 4 slices", true, 4, {}, {}, 0},
                    {"no chains", false, 1, {}, {}, 0}};
      for (Way& w : ways) {
        cpu::CpuRunnerOptions o;
        o.num_blocks = 64;
        o.block_size = 16;
        o.num_state_slots = 4;
        o.state_records = speculative_state_records(k, rollback());
        VerifyRowRecorder r(micro.config, micro.weights, o, pool);
        SchedulerLimits l = limits_k(k);
        l.speculative_chain_in_step = w.chains;
        l.speculative_chain_slices = w.slices;
        expect_same(run(r, l, requests), plain, w.name);
        w.counters = scheduler->counters().speculation;
        w.rows = r.rows;
        w.early_steps = r.early_steps;
      }
      const Way &one = ways[0], &four_slices = ways[1], &none = ways[2];
      EXPECT_EQ(none.counters.step_chains, 0u);
      EXPECT_EQ(none.early_steps, 0);
      if (rollback() == SpeculativeRollback::kRecords) {
        EXPECT_GT(one.counters.step_chains, 0u);
        EXPECT_GT(one.early_steps, 0);
        // At C4 the steps of four slices chain too.
        if (count > 1) {
          EXPECT_GT(four_slices.counters.step_chains, one.counters.step_chains);
        } else {
          EXPECT_EQ(four_slices.counters.step_chains, one.counters.step_chains);
        }
      }
      EXPECT_EQ(one.rows, none.rows);
      EXPECT_EQ(four_slices.rows, none.rows);
      for (size_t i = 0; i < size_t(k); ++i) {
        EXPECT_EQ(one.counters.accepted[i], none.counters.accepted[i]) << "position " << i;
        EXPECT_EQ(four_slices.counters.accepted[i], none.counters.accepted[i]) << "position " << i;
      }
    }
  }
}

// A runner that runs a verify step of more than `max_rows` rows without its drafts, as the CUDA
// runner does past its decode kernels' rows (drafts_fit), and then hands no main rows back from
// collect_main (draft_chain_width 0): the contract ModelRunner::collect_main states for it.
class RowLimitedDrafts : public cpu::CpuModelRunner {
 public:
  RowLimitedDrafts(const LoadedModel& m, const cpu::CpuRunnerOptions& o, ThreadPool& pool,
                   int64_t max_rows)
      : cpu::CpuModelRunner(m.config, m.weights, o, pool), max_rows_(max_rows) {}
  void submit(const ForwardBatch& batch, const StepSampling& sampling) override {
    declined_ = sampling.draft_on_picks && batch.num_rows() > max_rows_;
    if (!declined_) return cpu::CpuModelRunner::submit(batch, sampling);
    ++declined_steps;
    StepSampling without = sampling;
    without.draft_on_picks = false;
    without.draft_chain = 0;
    cpu::CpuModelRunner::submit(batch, without);
  }
  void collect_main(StepResult& main) override {
    if (!declined_) return cpu::CpuModelRunner::collect_main(main);
    main.draft_chain_width = 0;
  }
  int declined_steps = 0;

 private:
  int64_t max_rows_;
  bool declined_ = false;
};

// A verify step the runner ran without its drafts, though the scheduler asked for a chain and
// commits early from it (session 38: on the GPU, eight slices of k = 4 stopped the process): the
// scheduler collects that step whole and the drafter drafts on the host, so the output is the
// output without speculation, and the steps of fewer slices still chain. Records rollback: with
// recompute, verify steps replay rows and never draft in the step.
TEST_F(SpeculativeDecodingTest, AVerifyStepRunWithoutItsDraftsIsCollectedWhole) {
  const auto requests = four();
  auto plain_runner = runner(64, 0);
  const auto plain = run(*plain_runner, limits_with(0), requests);
  const int k = 3;
  cpu::CpuRunnerOptions o;
  o.num_blocks = 64;
  o.block_size = 16;
  o.num_state_slots = 4;
  o.state_records = speculative_state_records(k, SpeculativeRollback::kRecords);
  // Four slices of k + 1 rows are 16: more than 12, three are not.
  RowLimitedDrafts r(micro, o, pool, 12);
  expect_same(run(r, limits_with(k), requests), plain, "steps of 16 rows without their drafts");
  EXPECT_GT(r.declined_steps, 0);
  EXPECT_GT(scheduler->counters().speculation.step_chains, 0u);
}

// The verify step pipelined on a model whose chains are often right (the chain-trained micro):
// each step is committed from its main rows and the next is built and submitted before its
// chains come back, and its slices check exactly the drafts the drafter's own chains would have
// given them: the same output, and at every draft position the same acceptance as with chains
// drafted after the step (dummy weights draft nothing right, so there a wrong draft would go
// unseen). Text prompts in its byte vocabulary, at C1 and C4.
TEST_P(SpeculativeRollbackTest, APipelinedVerifyStepChecksTheDraftersOwnChains) {
  const auto trained =
      load_model_dir(testing::source_dir() + "/tinyglm/weights/tinyglm-micro-trained-mtp-chain");
  std::vector<GenerationRequest> all;
  for (const char* t : byte_texts::kProbes) all.push_back(byte_texts::greedy_request(t, 40));
  const int k = 3;
  cpu::CpuRunnerOptions o;
  o.num_blocks = 64;
  o.block_size = 16;
  o.num_state_slots = 4;
  for (size_t count : {size_t(1), size_t(4)}) {
    SCOPED_TRACE("C" + std::to_string(count));
    const std::vector<GenerationRequest> requests(all.begin(), all.begin() + long(count));
    o.state_records = 0;
    cpu::CpuModelRunner plain_runner(trained->config, trained->weights, o, pool);
    const auto plain = run(plain_runner, limits_with(0), requests);
    o.state_records = speculative_state_records(k, rollback());
    SpeculationCounters counters[2];
    int early_steps[2] = {0, 0};
    for (int chains : {0, 1}) {
      VerifyRowRecorder r(trained->config, trained->weights, o, pool);
      SchedulerLimits l = limits_k(k);
      l.speculative_chain_in_step = chains == 1;
      expect_same(run(r, l, requests), plain, chains ? "pipelined" : "drafter's chains");
      counters[chains] = scheduler->counters().speculation;
      early_steps[chains] = r.early_steps;
    }
    EXPECT_EQ(early_steps[0], 0);
    // Rolling back by recompute, a C4 step mostly holds replayed rows (no logits), and such
    // steps run no chain (speculator.h); at C1 enough do.
    if (rollback() == SpeculativeRollback::kRecords || count == 1) {
      EXPECT_GT(early_steps[1], 0);
      EXPECT_GT(counters[1].step_chains, 0u);
    }
    EXPECT_GT(counters[1].accepted[1], 0u);  // chained drafts were right, and counted
    for (size_t i = 0; i < size_t(k); ++i) {
      EXPECT_EQ(counters[1].drafted[i], counters[0].drafted[i]) << "position " << i;
      EXPECT_EQ(counters[1].accepted[i], counters[0].accepted[i]) << "position " << i;
    }
  }
}

// Requests that end while a pipelined verify step is in flight: one cancelled between steps, and
// short ones that end by length inside a step committed from its main rows. The others' output
// is the output without speculation, the short ones' is its prefix, the cancelled one gets no
// token after its cancellation, and every block and state slot comes back (the chain-trained
// micro, k = 3, C4).
TEST_P(SpeculativeRollbackTest, RequestsEndingUnderAPipelinedStepFreeEverything) {
  const auto trained =
      load_model_dir(testing::source_dir() + "/tinyglm/weights/tinyglm-micro-trained-mtp-chain");
  std::vector<GenerationRequest> requests;
  const int max_tokens[] = {40, 3, 40, 5};
  for (size_t i = 0; i < byte_texts::kProbes.size(); ++i)
    requests.push_back(byte_texts::greedy_request(byte_texts::kProbes[i], max_tokens[i]));
  cpu::CpuRunnerOptions o;
  o.num_blocks = 64;
  o.block_size = 16;
  o.num_state_slots = 4;
  cpu::CpuModelRunner plain_runner(trained->config, trained->weights, o, pool);
  const auto plain = run(plain_runner, limits_with(0), requests);
  const int k = 3;
  o.state_records = speculative_state_records(k, rollback());
  VerifyRowRecorder r(trained->config, trained->weights, o, pool);
  Scheduler s(r, limits_k(k));
  std::vector<std::vector<int32_t>> out(requests.size());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (size_t i = 0; i < requests.size(); ++i) {
    GenerationRequest q = requests[i];
    q.on_event = [&out, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) out[i].push_back(t.id);
    };
    handles.push_back(std::make_shared<RequestHandle>(i + 1));
    s.add(handles.back(), std::move(q));
  }
  size_t tokens_at_cancel = 0;
  for (int step = 0; !s.idle() && step < 100000; ++step) {
    // Request 2 is cancelled once it has a few tokens, between two steps.
    if (tokens_at_cancel == 0 && out[2].size() >= 6) {
      handles[2]->cancel();
      tokens_at_cancel = out[2].size();
    }
    s.step();
  }
  ASSERT_TRUE(s.idle());
  if (rollback() == SpeculativeRollback::kRecords) {
    EXPECT_GT(r.early_steps, 0);
  }
  EXPECT_EQ(out[0], plain[0].tokens);
  EXPECT_EQ(out[1], plain[1].tokens);  // 3 tokens
  EXPECT_EQ(out[3], plain[3].tokens);  // 5 tokens
  ASSERT_GT(tokens_at_cancel, 0u);
  EXPECT_EQ(out[2].size(), tokens_at_cancel);
  EXPECT_TRUE(std::equal(out[2].begin(), out[2].end(), plain[2].tokens.begin()));
  EXPECT_EQ(s.blocks().num_free(), s.blocks().num_blocks());
}

TEST_P(SpeculativeRollbackTest, MostlyRightDraftsAreAcceptedAndChangeNothing) {
  const auto requests = four();
  auto plain_runner = runner(64, 0);
  const auto plain = run(*plain_runner, limits_with(0), requests);
  const int vocab = micro.config.vocab_size;
  for (int k : {1, 3, 4}) {
    auto r = runner_k(64, k);
    auto oracle = std::make_unique<OracleDrafter>(answers(requests, plain), 7, vocab);
    expect_same(run(*r, limits_k(k), requests, std::move(oracle)), plain,
                "oracle, k=" + std::to_string(k));
    const SpeculationCounters c = scheduler->counters().speculation;
    uint64_t drafted = 0, accepted = 0;
    for (int i = 0; i < k; ++i) {
      EXPECT_GT(c.accepted[size_t(i)], 0u) << "k=" << k << ", position " << i;
      drafted += c.drafted[size_t(i)];
      accepted += c.accepted[size_t(i)];
    }
    EXPECT_LT(accepted, drafted) << "k=" << k;  // the wrong drafts were rejected
    // Fewer steps than tokens: several tokens committed per verify step.
    EXPECT_GT(c.verify_tokens, c.verify_steps + c.verify_steps / 2) << "k=" << k;
    EXPECT_EQ(scheduler->blocks().num_free(), 64);
  }
}

TEST_P(SpeculativeRollbackTest, EveryDraftRejectedChangesNothing) {
  // Rejections in a row: each verify slice rolls back the one before it.
  const auto requests = four();
  auto plain_runner = runner(64, 0);
  const auto plain = run(*plain_runner, limits_with(0), requests);
  auto r = runner_k(64, 2);
  auto wrong =
      std::make_unique<OracleDrafter>(answers(requests, plain), 1, micro.config.vocab_size);
  expect_same(run(*r, limits_k(2), requests, std::move(wrong)), plain, "every draft wrong");
  const SpeculationCounters c = scheduler->counters().speculation;
  EXPECT_EQ(c.accepted[0], 0u);
  EXPECT_GT(c.drafted[0], 20u);
  // Recompute runs the last token of each rejected slice again (one row); records, nothing.
  if (rollback() == SpeculativeRollback::kRecompute)
    EXPECT_GT(c.replayed_rows, 20u);
  else
    EXPECT_EQ(c.replayed_rows, 0u);
  EXPECT_EQ(scheduler->blocks().num_free(), 64);
}

TEST_P(SpeculativeRollbackTest, ARollbackThatNeverRestoresTheStateChangesTheOutput) {
  // The negative control of the checks above: the same run with every restore dropped.
  const auto requests = four();
  auto plain_runner = runner(64, 0);
  const auto plain = run(*plain_runner, limits_with(0), requests);
  auto inner = runner_k(64, 3);
  NoRestoreRunner broken(*inner);
  auto oracle =
      std::make_unique<OracleDrafter>(answers(requests, plain), 3, micro.config.vocab_size);
  const auto out = run(broken, limits_k(3), requests, std::move(oracle));
  EXPECT_GT(broken.restores_dropped, 0);
  size_t differ = 0;
  for (size_t i = 0; i < out.size(); ++i)
    differ += out[i].tokens != plain[i].tokens || out[i].logprobs != plain[i].logprobs;
  EXPECT_GT(differ, 0u) << "the output checks cannot tell a rollback that never restores";
}

TEST_P(SpeculativeRollbackTest, AStopTokenOrMaxTokensInsideAcceptedDraftsEndsTheRequestThere) {
  const auto requests = four();
  auto plain_runner = runner(64, 0);
  const auto plain = run(*plain_runner, limits_with(0), requests);
  std::vector<GenerationRequest> ending = requests;
  ending[0].sampling.stop_token_ids = {plain[0].tokens[6]};
  ending[1].sampling.max_tokens = 7;
  auto plain_again = runner(64, 0);
  const auto expected = run(*plain_again, limits_with(0), ending);
  ASSERT_EQ(expected[0].finish, FinishReason::kStop);
  ASSERT_EQ(expected[1].tokens.size(), 7u);
  auto r = runner_k(64, 4);
  auto oracle = std::make_unique<OracleDrafter>(answers(requests, plain), 1000, 320);
  expect_same(run(*r, limits_k(4), ending, std::move(oracle)), expected, "ending");
  EXPECT_EQ(scheduler->blocks().num_free(), 64);
}

TEST_P(SpeculativeRollbackTest, PreemptionChangesNoToken) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 5; ++i) requests.push_back(greedy(40, i, 60));
  SchedulerLimits tight = limits_with(0);
  tight.reserve_output_tokens = 16;  // a small pool fills up: preemptions
  auto plain_runner = runner(12, 0);
  const auto plain = run(*plain_runner, tight, requests);
  EXPECT_GT(scheduler->counters().preemptions, 0u);
  tight.speculative_tokens = 3;
  tight.speculative_rollback = rollback();
  auto r = runner_k(12, 3);
  const auto spec = run(*r, tight, requests);
  EXPECT_GT(scheduler->counters().preemptions, 0u);
  EXPECT_EQ(scheduler->blocks().num_free(), 12);
  // Tokens only: a preempted sequence's recompute prefill sums differently from decode rows
  // (scheduler.h), and speculation preempts at other steps, so the last bits of later logprobs
  // may differ from the plain run's, as between any two schedules with preemption.
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(spec[i].tokens, plain[i].tokens) << i;
}

TEST_P(SpeculativeRollbackTest, ATurnResumedFromThePrefixCacheIsDraftedAndChangesNothing) {
  // Turn 1's answer passes a grid point (256), so the cache prefills it once more after turn 1
  // (an answer: a sequence that only prefills, which speculation leaves alone).
  GenerationRequest first = greedy(150, 1, 120);
  auto cold_runner = runner(64, 0);
  const auto cold_first = run(*cold_runner, limits_with(0), {first});
  GenerationRequest second = first;  // the next turn: turn 1, its answer and a new message
  second.prompt.insert(second.prompt.end(), cold_first[0].tokens.begin(),
                       cold_first[0].tokens.end());
  for (int32_t t : prompt_of(30, 9)) second.prompt.push_back(t);
  const auto cold_second = run(*cold_runner, limits_with(0), {second});

  SchedulerLimits cached = limits_k(3);
  cached.prefix_caching = true;
  auto warm_runner = runner_k(64, 3, 8);
  Scheduler s(*warm_runner, cached);
  expect_same(run_on(s, {first}), cold_first, "turn 1");
  expect_same(run_on(s, {second}), cold_second, "turn 2");
  EXPECT_GT(s.counters().prefix_hit_tokens, 100u);
  EXPECT_GT(s.counters().prefix.answer_tokens, 0u);
  EXPECT_GT(s.counters().speculation.verify_steps, 0u);
}

TEST_F(SpeculativeDecodingTest, RequestsThatOptOutAreNotDrafted) {
  std::vector<GenerationRequest> requests = four();
  for (auto& q : requests) q.disable_speculation = true;
  requests[2].disable_speculation = false;
  requests[2].sampling.temperature = 0.8f;  // sampled with logprobs: no rejection logprob
  auto r = runner(64, 3);
  run(*r, limits_with(2), requests);
  EXPECT_EQ(scheduler->counters().speculation.drafted[0], 0u);
  EXPECT_EQ(scheduler->counters().speculation.verify_steps, 0u);
}

// The engine thread's time in the runner's submit, its collect and the drafter is counted
// (StepHostTimes, what speculation_bench splits a step's time by): each part is there, and
// together they are no more than the run took.
TEST_F(SpeculativeDecodingTest, TheEngineThreadsTimeIsSplitIntoSubmitCollectAndDraft) {
  auto r = runner_for(64, 2, SpeculativeRollback::kRecords);
  const auto from = std::chrono::steady_clock::now();
  run(*r, limits_with(2), four());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
  const StepHostTimes t = scheduler->counters().host;
  EXPECT_GT(t.submit_seconds, 0.0);
  EXPECT_GT(t.collect_seconds, 0.0);
  EXPECT_GT(t.draft_seconds, 0.0);  // k = 2: the MTP drafter's own chained forward
  EXPECT_LE(t.submit_seconds + t.collect_seconds + t.draft_seconds, wall);
}

// Wraps a drafter and checks what it leaves behind for constrained sequences: every draft is
// one the sequence's grammar allows in turn, and the matcher is as the drafter found it.
class GrammarCheckingDrafter : public Drafter {
 public:
  explicit GrammarCheckingDrafter(std::unique_ptr<Drafter> inner) : inner_(std::move(inner)) {}
  void draft(std::vector<DraftJob>& jobs) override {
    std::vector<std::vector<uint32_t>> before;
    for (const DraftJob& job : jobs) before.push_back(mask_of(job.grammar));
    inner_->draft(jobs);
    for (size_t j = 0; j < jobs.size(); ++j) {
      GrammarMatcher* g = jobs[j].grammar;
      if (!g) continue;
      EXPECT_EQ(mask_of(g), before[j]) << "the drafter left the matcher advanced";
      int accepted = 0;
      for (int32_t t : jobs[j].drafts) {
        if (!g->accept_token(t)) break;
        ++accepted;
      }
      g->rollback(accepted);
      constrained_drafts += jobs[j].drafts.size();
      refused_drafts += jobs[j].drafts.size() - size_t(accepted);
    }
  }
  bool reads_step_drafts() const override { return inner_->reads_step_drafts(); }
  size_t constrained_drafts = 0, refused_drafts = 0;

  static std::vector<uint32_t> mask_of(const GrammarMatcher* g) {
    std::vector<uint32_t> m;
    if (g) g->fill_mask(m);
    return m;
  }

 private:
  std::unique_ptr<Drafter> inner_;
};

// A request with an output grammar is drafted for: each verify row is checked under the mask
// the row has without speculation (the matcher advanced by every token committed before it),
// so its output is the plain run's, alone and among unconstrained requests, with the MTP
// module's drafts (drafted under the grammar) and with an oracle's, of which every third is off
// by one (mostly a token the grammar refuses there, which the mask rejects).
TEST_P(SpeculativeRollbackTest, AConstrainedRequestIsDraftedForAndKeepsItsOutput) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.schema = nlohmann::json::parse(R"({"type":"object","properties":{
      "id":{"type":"integer","minimum":0,"maximum":999},"tag":{"enum":["alpha","beta","gamma"]},
      "ok":{"type":"boolean"}},"required":["id","tag","ok"],"additionalProperties":false})");
  std::vector<GenerationRequest> requests = four();
  const int vocab = micro.config.vocab_size;
  requests[1].constraint = c;
  requests[1].grammar = compile_output_constraint(
      c, TokenVocabulary::for_byte_tokenizer(vocab, micro.config.eos_token_ids));
  requests[1].sampling.ignore_eos = false;
  requests[1].sampling.max_tokens = 160;
  auto plain_runner = runner(64, 0);
  const auto plain = run(*plain_runner, limits_with(0), requests);
  ASSERT_EQ(plain[1].finish, FinishReason::kStop) << "the constrained value did not complete";
  for (int k : {1, 3}) {
    const std::string at = "k=" + std::to_string(k);
    auto r = runner_k(64, k);
    auto mtp = std::make_unique<GrammarCheckingDrafter>(std::make_unique<MtpDrafter>(*r));
    GrammarCheckingDrafter& checked = *mtp;
    expect_same(run(*r, limits_k(k), {requests[1]}, std::move(mtp)), {plain[1]},
                "constrained alone, " + at);
    EXPECT_GT(scheduler->counters().speculation.verify_steps, 0u) << at;
    // Verify rows took the drafter's masks (the output above shows they were the right ones).
    EXPECT_GT(scheduler->counters().speculation.reused_masks, 0u) << at;
    EXPECT_GT(checked.constrained_drafts, 0u) << at;
    EXPECT_EQ(checked.refused_drafts, 0u) << "the MTP drafter drafted outside the grammar, " << at;
    expect_same(run(*r, limits_k(k), requests), plain, "constrained among drafted ones, " + at);
    EXPECT_EQ(scheduler->blocks().num_free(), 64) << at;

    auto oracle_runner = runner_k(64, k);
    auto oracle = std::make_unique<OracleDrafter>(answers(requests, plain), 3, vocab);
    expect_same(run(*oracle_runner, limits_k(k), {requests[1]}, std::move(oracle)), {plain[1]},
                "constrained, oracle drafts, " + at);
    const SpeculationCounters s = scheduler->counters().speculation;
    EXPECT_EQ(s.reused_masks, 0u) << "the oracle leaves no masks: every row's is filled, " << at;
    EXPECT_GT(s.accepted[0], 0u) << at;
    EXPECT_LT(s.accepted[0], s.drafted[0]) << "the wrong drafts were rejected, " << at;
  }
}

TEST_F(SpeculativeDecodingTest, ARunnerWithoutStateRecordsIsRefusedNamingTheOption) {
  auto r = runner(64, 2);
  try {
    Scheduler s(*r, limits_with(2));
    FAIL() << "two drafts need three state records";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--speculative-tokens"), std::string::npos) << e.what();
  }
}

TEST_F(SpeculativeDecodingTest, ChainsInStepsOfNoSliceAreRefused) {
  auto r = runner(64, 3);
  SchedulerLimits l = limits_with(2);
  l.speculative_chain_slices = 0;
  try {
    Scheduler s(*r, l);
    FAIL() << "a verify step has at least one slice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chain-slices"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sparkglm
