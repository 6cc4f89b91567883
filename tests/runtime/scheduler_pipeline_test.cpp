// Pipelined steps (scheduler.h): the scheduler submits step N+1 before it collects step N when
// every token of step N is a plain greedy pick, so its rows read those picks in the runner. The
// tokens every request sees must be those of the unpipelined path (logprobs on: each step is
// collected before the next is built), through split prefill, stop tokens drawn while the next
// step is queued, preemption, cancellation and sampled requests alongside.
#include <gtest/gtest.h>

#include <memory>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/runtime/scheduler.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

// The CPU runner behind the default (deferred) pipeline, counting the rows that read a pick.
class CountingRunner : public ModelRunner {
 public:
  CountingRunner(int blocks, int slots, ThreadPool& pool)
      : inner_(testing::micro_model().config, testing::micro_model().weights, {blocks, 16, slots},
               pool) {}
  const ModelConfig& config() const override { return inner_.config(); }
  CacheGeometry cache_geometry() const override { return inner_.cache_geometry(); }
  void forward(const ForwardBatch& b, ForwardOutput& out) override { inner_.forward(b, out); }
  void forward_mtp(const ForwardBatch& b, const std::vector<float>& h,
                   ForwardOutput& out) override {
    inner_.forward_mtp(b, h, out);
  }
  void submit(const ForwardBatch& b, const StepSampling& s) override {
    for (int32_t from : s.token_from) picked_inputs += from >= 0;
    ++submitted;
    ModelRunner::submit(b, s);
  }
  int picked_inputs = 0, submitted = 0;

 private:
  cpu::CpuModelRunner inner_;
};

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 13 + salt * 29 + 3) % 256;
  return t;
}

GenerationRequest greedy(int prompt_len, int salt, int max_tokens, bool pipelined) {
  GenerationRequest r;
  r.prompt = prompt_of(prompt_len, salt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = !pipelined;  // logprobs need the logits on the host: no pipelining
  return r;
}

struct Outcome {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
};

class SchedulerPipelineTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  // Runs the requests to the end; `cancel_after` cancels request 0 after that many steps.
  std::vector<Outcome> run(CountingRunner& runner, const SchedulerLimits& limits,
                           const std::vector<GenerationRequest>& requests, int cancel_after = -1) {
    scheduler_ = std::make_unique<Scheduler>(runner, limits);
    Scheduler& s = *scheduler_;
    std::vector<Outcome> out(requests.size());
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (size_t i = 0; i < requests.size(); ++i) {
      GenerationRequest r = requests[i];
      r.on_event = [&out, i](const RequestEvent& e) {
        for (const auto& t : e.tokens) out[i].tokens.push_back(t.id);
        if (e.finish != FinishReason::kNone) out[i].finish = e.finish;
      };
      handles.push_back(std::make_shared<RequestHandle>(i + 1));
      s.add(handles.back(), std::move(r));
    }
    for (int step = 0; !s.idle() && step < 100000; ++step) {
      if (step == cancel_after) handles[0]->cancel();
      s.step();
    }
    EXPECT_TRUE(s.idle());
    return out;
  }
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerPipelineTest, PipelinedGreedyEqualsTheUnpipelinedPathThroughSplitPrefill) {
  SchedulerLimits limits;
  limits.max_prefill_tokens = 128;
  std::vector<GenerationRequest> piped, plain;
  const int lens[] = {150, 70, 5, 200}, outs[] = {12, 20, 16, 8};
  for (int i = 0; i < 4; ++i) {
    piped.push_back(greedy(lens[i], i + 1, outs[i], true));
    plain.push_back(greedy(lens[i], i + 1, outs[i], false));
  }
  CountingRunner a(64, 4, pool), b(64, 4, pool);
  const auto x = run(a, limits, piped);
  const int free_after = scheduler_->blocks().num_free();
  const auto y = run(b, limits, plain);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].tokens, y[i].tokens) << "request " << i;
    EXPECT_EQ(x[i].finish, FinishReason::kLength);
    EXPECT_EQ(int(x[i].tokens.size()), outs[i]);
  }
  EXPECT_EQ(free_after, 64);
  EXPECT_GT(a.picked_inputs, 40);  // nearly every decode row read its token in the runner
  EXPECT_EQ(b.picked_inputs, 0);
}

TEST_F(SchedulerPipelineTest, AStopTokenDrawnWhileTheNextStepIsQueuedEndsTheRequestThere) {
  CountingRunner probe(64, 4, pool);
  const auto free_run = run(probe, {}, {greedy(30, 3, 12, true)});
  // Stop on the fifth token: the step after it was already queued with a row for this request.
  GenerationRequest piped = greedy(30, 3, 12, true), plain = greedy(30, 3, 12, false);
  const int32_t stop = free_run[0].tokens[4];
  piped.sampling.stop_token_ids = plain.sampling.stop_token_ids = {stop};
  CountingRunner a(64, 4, pool), b(64, 4, pool);
  const auto x = run(a, {}, {piped, greedy(20, 4, 12, true)});
  EXPECT_EQ(scheduler_->blocks().num_free(), 64);
  const auto y = run(b, {}, {plain, greedy(20, 4, 12, false)});
  EXPECT_EQ(x[0].tokens, y[0].tokens);
  EXPECT_EQ(x[0].finish, FinishReason::kStop);
  EXPECT_EQ(x[0].tokens.back(), stop);
  EXPECT_LE(x[0].tokens.size(), 5u);
  EXPECT_EQ(x[1].tokens, y[1].tokens);  // its neighbour's wasted row changed nothing for it
}

TEST_F(SchedulerPipelineTest, PreemptionDrainsThePipelineAndChangesNoOutput) {
  SchedulerLimits limits;
  limits.reserve_output_tokens = 16;
  std::vector<GenerationRequest> piped, plain;
  for (int i = 0; i < 5; ++i) {
    piped.push_back(greedy(40, i, 60, true));
    plain.push_back(greedy(40, i, 60, false));
  }
  CountingRunner a(12, 4, pool), b(12, 4, pool);
  const auto x = run(a, limits, piped);
  EXPECT_GT(scheduler_->counters().preemptions, 0u);
  EXPECT_EQ(scheduler_->blocks().num_free(), 12);
  const auto y = run(b, limits, plain);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].finish, FinishReason::kLength) << "request " << i;
    EXPECT_EQ(x[i].tokens, y[i].tokens) << "request " << i;
  }
  EXPECT_GT(a.picked_inputs, 0);
}

TEST_F(SchedulerPipelineTest, CancellingAQueuedRequestReturnsItsBlocksAndSparesTheOthers) {
  CountingRunner a(32, 4, pool), b(32, 4, pool);
  const std::vector<GenerationRequest> reqs = {greedy(30, 1, 200, true), greedy(25, 2, 20, true)};
  const auto x = run(a, {}, reqs, 6);
  EXPECT_EQ(x[0].finish, FinishReason::kCancelled);
  EXPECT_LT(x[0].tokens.size(), 200u);
  EXPECT_EQ(scheduler_->blocks().num_free(), 32);
  const auto y = run(b, {}, {greedy(25, 2, 20, false)});
  EXPECT_EQ(x[1].tokens, y[0].tokens);
  EXPECT_EQ(x[1].finish, FinishReason::kLength);
}

TEST_F(SchedulerPipelineTest, ASampledRequestAlongsideCollectsEachStepAndKeepsItsDraws) {
  GenerationRequest sampled = greedy(40, 7, 24, true);
  sampled.sampling.temperature = 1.0f;
  sampled.sampling.top_p = 0.9f;
  sampled.sampling.seed = 1234;
  CountingRunner a(64, 4, pool), b(64, 4, pool);
  const auto alone = run(a, {}, {sampled});
  EXPECT_EQ(a.picked_inputs, 0);  // a drawn token is drawn on the host
  const auto mixed = run(b, {}, {greedy(90, 1, 30, true), sampled, greedy(3, 2, 5, true)});
  EXPECT_EQ(alone[0].tokens, mixed[1].tokens);
  CountingRunner c(64, 4, pool);
  EXPECT_EQ(run(c, {}, {greedy(90, 1, 30, false)})[0].tokens, mixed[0].tokens);
}

}  // namespace
}  // namespace sparkglm
