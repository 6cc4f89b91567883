// The engine thread: requests submitted from several threads all finish, events arrive in order,
// and shutdown cancels what is left and frees the pool.
#include "engine/runtime/serving_engine.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/model/model_loader.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

struct Collected {
  std::mutex m;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::kNone;
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return finish != FinishReason::kNone; });
  }
};

GenerationRequest request(int n, int max_tokens, Collected& c) {
  GenerationRequest r;
  for (int i = 0; i < n; ++i) r.prompt.push_back((i * 7 + n) % 256);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.on_event = [&c](const RequestEvent& e) {
    std::lock_guard<std::mutex> lock(c.m);
    for (const auto& t : e.tokens) c.tokens.push_back(t.id);
    if (e.finish != FinishReason::kNone) {
      c.finish = e.finish;
      c.cv.notify_all();
    }
  };
  return r;
}

TEST(ServingEngine, RequestsFromManyThreadsFinishAndThePoolComesBack) {
  ThreadPool pool(2);
  const auto m = load_model_preset("tinyglm-micro", 0, kDefaultDummySeed, pool);
  cpu::CpuModelRunner runner(m->config, m->weights, {64, 16, 4}, pool);
  ServingEngine engine(runner, {});
  std::vector<Collected> results(8);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&, i] { engine.submit(request(10 + 9 * i, 6 + i, results[size_t(i)])); });
  for (auto& t : clients) t.join();
  for (int i = 0; i < 8; ++i) {
    results[size_t(i)].wait();
    EXPECT_EQ(results[size_t(i)].finish, FinishReason::kLength) << i;
    EXPECT_EQ(int(results[size_t(i)].tokens.size()), 6 + i) << i;
  }
  // Stats are published after each step, so the last finish may be seen a moment before them.
  EngineStats s = engine.stats();
  for (int i = 0; i < 500 && s.requests_finished < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = engine.stats();
  }
  EXPECT_EQ(s.free_blocks, s.total_blocks);
  EXPECT_EQ(s.requests_finished, 8u);
  EXPECT_EQ(s.generated_tokens, uint64_t(6 * 8 + 28));
}

// Every step of these engines takes at least 5 ms (the after-step hook sleeps), so a request's
// length, not the machine's speed, says whether it can end inside a grace period: 400 tokens
// take 2 s at least (tinyglm-micro itself decodes 400 tokens in under 50 ms on a 2-core host,
// where this test without the hook ended with kLength in 102 of 400 runs).
void slow_steps(ServingEngine& engine) {
  engine.set_after_step([] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
}

TEST(ServingEngine, ShutdownCancelsUnfinishedWorkAndRefusesNewRequests) {
  ThreadPool pool(2);
  const auto m = load_model_preset("tinyglm-micro", 0, kDefaultDummySeed, pool);
  cpu::CpuModelRunner runner(m->config, m->weights, {64, 16, 4}, pool);
  ServingEngine engine(runner, {});
  slow_steps(engine);
  Collected long_one;
  engine.submit(request(20, 400, long_one));  // at least 2 s: still running at the deadline
  engine.shutdown(std::chrono::milliseconds(50));
  long_one.wait();
  EXPECT_EQ(long_one.finish, FinishReason::kCancelled);
  EXPECT_LT(long_one.tokens.size(), 400u);
  Collected late;
  EXPECT_THROW(engine.submit(request(5, 2, late)), Error);
  EXPECT_EQ(engine.stats().free_blocks, engine.stats().total_blocks);
}

// A request submitted just before shutdown is given the grace like any running one: shutdown
// must not take "the inbox is empty" for "nothing runs" while the engine thread holds it between
// the inbox and its first step.
TEST(ServingEngine, ShutdownLetsARequestJustSubmittedFinishWithinTheGrace) {
  ThreadPool pool(2);
  const auto m = load_model_preset("tinyglm-micro", 0, kDefaultDummySeed, pool);
  cpu::CpuModelRunner runner(m->config, m->weights, {64, 16, 4}, pool);
  for (int round = 0; round < 20; ++round) {
    ServingEngine engine(runner, {});
    slow_steps(engine);
    Collected short_one;
    engine.submit(request(12, 3, short_one));  // a few steps: some 20 ms
    engine.shutdown(std::chrono::seconds(30));
    short_one.wait();
    ASSERT_EQ(short_one.finish, FinishReason::kLength) << "round " << round;
    EXPECT_EQ(short_one.tokens.size(), 3u);
    EXPECT_EQ(engine.stats().free_blocks, engine.stats().total_blocks);
  }
}

}  // namespace
}  // namespace sparkglm
