// Continuous batching on tinyglm-micro: outputs do not depend on concurrency, admission waits for
// room, and every path out of the engine returns the blocks and the state slot.
#include "engine/runtime/scheduler.h"

#include <gtest/gtest.h>

#include <map>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/model/model_loader.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

const LoadedModel& micro() {
  return testing::micro_model();
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 13 + salt * 29 + 3) % 256;
  return t;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // bitwise evidence: equal ids could hide different logits
  FinishReason finish = FinishReason::kNone;
  int events = 0;
};

class SchedulerTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  cpu::CpuModelRunner make_runner(int blocks, int slots) {
    return cpu::CpuModelRunner(micro().config, micro().weights, {blocks, 16, slots}, pool);
  }
  // Submits every request to one scheduler and steps until all finish.
  std::vector<Outcome> run(Scheduler& s, const std::vector<GenerationRequest>& requests,
                           std::vector<std::shared_ptr<RequestHandle>>* handles = nullptr) {
    std::vector<Outcome> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      GenerationRequest r = requests[i];
      r.on_event = [&out, i](const RequestEvent& e) {
        for (const auto& t : e.tokens) {
          out[i].tokens.push_back(t.id);
          out[i].logprobs.push_back(t.logprob);
        }
        if (e.finish != FinishReason::kNone) out[i].finish = e.finish;
        ++out[i].events;
      };
      auto h = std::make_shared<RequestHandle>(i + 1);
      if (handles) handles->push_back(h);
      s.add(h, std::move(r));
    }
    for (int guard = 0; !s.idle() && guard < 100000; ++guard) s.step();
    return out;
  }
  GenerationRequest greedy(int prompt_len, int salt, int max_tokens) {
    GenerationRequest r;
    r.prompt = prompt_of(prompt_len, salt);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.sampling.logprobs = true;
    return r;
  }
};

TEST_F(SchedulerTest, GreedyOutputAtConcurrencyFourEqualsEachRequestAlone) {
  // Prompts longer than the prefill budget, so prefill is split and shared between sequences.
  const std::vector<GenerationRequest> reqs = {greedy(150, 1, 12), greedy(70, 2, 20),
                                               greedy(5, 3, 16), greedy(200, 4, 8)};
  SchedulerLimits limits;
  limits.max_prefill_tokens = 128;
  auto runner = make_runner(64, 4);
  Scheduler together(runner, limits);
  const auto batched = run(together, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto lone_runner = make_runner(64, 4);
    SchedulerLimits lone_limits = limits;
    lone_limits.max_prefill_tokens = 512;  // a different prefill schedule too
    Scheduler alone(lone_runner, lone_limits);
    const auto single = run(alone, {reqs[i]});
    EXPECT_EQ(batched[i].tokens, single[0].tokens) << "request " << i;
    EXPECT_EQ(batched[i].logprobs, single[0].logprobs) << "request " << i;
    EXPECT_EQ(batched[i].finish, FinishReason::kLength);
    EXPECT_EQ(int(batched[i].tokens.size()), reqs[i].sampling.max_tokens);
  }
  EXPECT_EQ(together.blocks().num_free(), 64);
}

TEST_F(SchedulerTest, PrefillSplitOffTheKdaChunkGridWouldChangeTheNumbers) {
  // The negative control for the test above: split prefill at arbitrary positions and the chunked
  // KDA arithmetic differs in its last bits, which the logprobs show.
  const GenerationRequest r = greedy(150, 1, 4);
  SchedulerLimits aligned, ragged;
  ragged.prefill_align = 1;
  ragged.max_prefill_tokens = 100;
  auto ra = make_runner(64, 4), rb = make_runner(64, 4);
  Scheduler a(ra, aligned), b(rb, ragged);
  const auto x = run(a, {r}), y = run(b, {r});
  EXPECT_NE(x[0].logprobs, y[0].logprobs);
}

TEST_F(SchedulerTest, SeededSamplingIsReproducibleWhateverIsBatchedAlongside) {
  GenerationRequest r = greedy(40, 7, 24);
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 1234;
  auto a_runner = make_runner(64, 4), b_runner = make_runner(64, 4);
  Scheduler a(a_runner, {}), b(b_runner, {});
  const auto alone = run(a, {r});
  const auto mixed = run(b, {greedy(90, 1, 30), r, greedy(3, 2, 5)});
  EXPECT_EQ(alone[0].tokens, mixed[1].tokens);
}

TEST_F(SchedulerTest, AdmissionWaitsForRoomAndEveryRequestCompletes) {
  // Each request reserves 3 blocks (40 + 8 tokens); the pool of 4 holds one at a time.
  auto runner = make_runner(4, 4);
  Scheduler s(runner, {});
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back(greedy(40, i, 8));
  const auto out = run(s, reqs);
  for (const auto& o : out) {
    EXPECT_EQ(o.finish, FinishReason::kLength);
    EXPECT_EQ(o.tokens.size(), 8u);
  }
  EXPECT_EQ(s.blocks().num_free(), 4);
}

TEST_F(SchedulerTest, AdmissionReservesOnlyPartOfALongOutputSoShortRequestsRunAlongside) {
  // A request with a long max_tokens (as one without max_tokens gets: the rest of the context)
  // reserves prompt + reserve_output_tokens, not its whole output, so a short request admitted
  // after it runs beside it and finishes first. Reserving all 190 tokens (12 of 14 blocks) would
  // have left the short one waiting for the long one.
  auto runner = make_runner(14, 4);
  SchedulerLimits limits;
  limits.reserve_output_tokens = 16;
  Scheduler s(runner, limits);
  std::vector<int> finish_order;
  std::vector<GenerationRequest> reqs = {greedy(40, 1, 150), greedy(30, 2, 4)};
  std::vector<Outcome> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].on_event = [&, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) out[i].tokens.push_back(t.id);
      if (e.finish != FinishReason::kNone) {
        out[i].finish = e.finish;
        finish_order.push_back(int(i));
      }
    };
    s.add(std::make_shared<RequestHandle>(i + 1), reqs[i]);
  }
  for (int guard = 0; !s.idle() && guard < 10000; ++guard) s.step();
  ASSERT_TRUE(s.idle());
  EXPECT_EQ(finish_order, (std::vector<int>{1, 0}));
  EXPECT_EQ(out[0].tokens.size(), 150u);
  EXPECT_EQ(out[1].tokens.size(), 4u);
  EXPECT_EQ(s.blocks().num_free(), 14);
}

TEST_F(SchedulerTest, AShortPromptBehindALongOneGetsItsFirstTokenFirst) {
  // A 1,024-token prompt arrives first, a 64-token one right after, with 256 prefill tokens a
  // step: the budget is shared (Scheduler::prefill_grants), so the short prompt is prefilled in
  // the first step and answers before the long prefill (four steps of the whole budget) is done.
  // Taking the budget in arrival order alone would make it wait for all of the long prefill.
  auto runner = make_runner(128, 4);
  SchedulerLimits limits;
  limits.max_prefill_tokens = 256;
  Scheduler s(runner, limits);
  int steps = 0;
  std::vector<int> first_token_step(2, -1);
  std::vector<GenerationRequest> reqs = {greedy(1024, 1, 3), greedy(64, 2, 3)};
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].on_event = [&, i](const RequestEvent& e) {
      if (!e.tokens.empty() && first_token_step[i] < 0) first_token_step[i] = steps;
    };
    s.add(std::make_shared<RequestHandle>(i + 1), reqs[i]);
  }
  for (; !s.idle() && steps < 10000; ++steps) s.step();
  ASSERT_TRUE(s.idle());
  ASSERT_GE(first_token_step[0], 0);
  ASSERT_GE(first_token_step[1], 0);
  EXPECT_LT(first_token_step[1], first_token_step[0]);
  EXPECT_LE(first_token_step[1], 2) << "prefilled in the first step, its token collected after";
  EXPECT_EQ(s.blocks().num_free(), 128);
}

TEST_F(SchedulerTest, OversubscribedPoolPreemptsTheNewestAndLosesNoRequest) {
  // Each request ends at 40 + 60 = 100 tokens (7 blocks) but is admitted with 4; the pool of 12
  // cannot hold two finished ones, so growth runs dry and the newest running sequence is
  // preempted, recomputed later, and completes. Nothing deadlocks, nothing is lost, every block
  // comes back.
  auto runner = make_runner(12, 4);
  SchedulerLimits limits;
  limits.reserve_output_tokens = 16;
  Scheduler s(runner, limits);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back(greedy(40, i, 60));
  const auto out = run(s, reqs);
  ASSERT_TRUE(s.idle()) << "the scheduler stopped making progress";
  EXPECT_GT(s.counters().preemptions, 0u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].finish, FinishReason::kLength) << "request " << i;
    EXPECT_EQ(out[i].tokens.size(), 60u) << "request " << i;
  }
  EXPECT_EQ(s.blocks().num_free(), 12);
  // The oldest request is never preempted: its output is that of a run alone.
  auto lone_runner = make_runner(12, 4);
  Scheduler alone(lone_runner, limits);
  EXPECT_EQ(run(alone, {reqs[0]})[0].tokens, out[0].tokens);
}

TEST_F(SchedulerTest, APreemptedRequestCanStillBeCancelledAndReturnsEverything) {
  auto runner = make_runner(12, 4);
  SchedulerLimits limits;
  limits.reserve_output_tokens = 16;
  Scheduler s(runner, limits);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::vector<Outcome> out(3);
  for (int i = 0; i < 3; ++i) {
    GenerationRequest r = greedy(40, i, 60);
    r.on_event = [&out, i](const RequestEvent& e) {
      if (e.finish != FinishReason::kNone) out[size_t(i)].finish = e.finish;
    };
    handles.push_back(std::make_shared<RequestHandle>(i + 1));
    s.add(handles.back(), std::move(r));
  }
  for (int guard = 0; s.counters().preemptions == 0 && guard < 10000; ++guard) s.step();
  ASSERT_GT(s.counters().preemptions, 0u);
  for (auto& h : handles) h->cancel();
  s.step();
  EXPECT_TRUE(s.idle());
  for (const auto& o : out) EXPECT_EQ(o.finish, FinishReason::kCancelled);
  EXPECT_EQ(s.blocks().num_free(), 12);
}

TEST_F(SchedulerTest, FinishedCancelledTimedOutAndFailedRequestsAllReturnTheirBlocks) {
  auto runner = make_runner(32, 4);
  Scheduler s(runner, {});
  const int free_at_start = s.blocks().num_free();
  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::vector<GenerationRequest> reqs = {greedy(30, 1, 6), greedy(30, 2, 400), greedy(30, 3, 400),
                                         greedy(20, 4, 5)};
  reqs[2].deadline = std::chrono::steady_clock::now();  // already expired
  std::vector<Outcome> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].on_event = [&out, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) out[i].tokens.push_back(t.id);
      if (e.finish != FinishReason::kNone) out[i].finish = e.finish;
    };
    handles.push_back(std::make_shared<RequestHandle>(i));
    s.add(handles.back(), reqs[i]);
  }
  s.step();
  s.step();
  handles[1]->cancel();  // mid-generation, as a client disconnect does
  for (int guard = 0; !s.idle() && guard < 10000; ++guard) s.step();
  EXPECT_EQ(out[0].finish, FinishReason::kLength);
  EXPECT_EQ(out[1].finish, FinishReason::kCancelled);
  EXPECT_EQ(out[2].finish, FinishReason::kTimeout);
  EXPECT_EQ(out[3].finish, FinishReason::kLength);
  EXPECT_EQ(s.blocks().num_free(), free_at_start);
}

TEST_F(SchedulerTest, ARequestThatCanNeverFitIsRefusedWithTheLimits) {
  auto runner = make_runner(4, 2);  // 64 tokens of KV
  SchedulerLimits limits;
  limits.max_num_seqs = 2;
  limits.max_batch_size = 2;
  limits.max_seq_len = 100;
  Scheduler s(runner, limits);
  try {
    s.check_fits(greedy(90, 1, 20));
    FAIL() << "expected a capacity error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCapacity);
    EXPECT_NE(std::string(e.what()).find("--max-seq-len 100"), std::string::npos) << e.what();
  }
  try {
    s.check_fits(greedy(60, 1, 20));
    FAIL() << "expected a capacity error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pool holds 64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.check_fits(greedy(0, 1, 2)), Error);
  GenerationRequest bad = greedy(4, 1, 2);
  bad.sampling.temperature = -1.0f;
  EXPECT_THROW(s.check_fits(bad), Error);
  SchedulerLimits too_many = limits;
  too_many.max_num_seqs = 3;  // more than the runner's state slots
  EXPECT_THROW(Scheduler(runner, too_many), Error);
}

}  // namespace
}  // namespace sparkglm
