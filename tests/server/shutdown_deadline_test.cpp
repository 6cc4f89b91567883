// The hard deadline of a shutdown: a process whose engine step hangs still exits, non-zero and
// with a log line saying why, once the grace (plus the close allowance) has passed.
#include "engine/server/shutdown_deadline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/runtime/serving_engine.h"
#include "tests/support/micro_model.h"

namespace sparkglm::server {
namespace {

using namespace std::chrono_literals;

// tinyglm-micro whose forward never returns, as a wedged device would.
class HangingRunner : public ModelRunner {
 public:
  explicit HangingRunner(ThreadPool& pool)
      : inner_(testing::micro_model().config, testing::micro_model().weights, {64, 16, 4}, pool) {}
  const ModelConfig& config() const override { return inner_.config(); }
  CacheGeometry cache_geometry() const override { return inner_.cache_geometry(); }
  void forward(const ForwardBatch&, ForwardOutput&) override {
    entered.store(true);
    for (;;) std::this_thread::sleep_for(1h);
  }
  void forward_mtp(const ForwardBatch& b, const std::vector<float>& h,
                   ForwardOutput& out) override {
    inner_.forward_mtp(b, h, out);
  }
  std::atomic<bool> entered{false};

 private:
  cpu::CpuModelRunner inner_;
};

// What sparkglm-serve does on SIGTERM, with a step that hangs: arm the deadline, shut the engine
// down with its grace. Never returns.
void shut_down_with_a_hung_step() {
  ThreadPool pool(1);
  HangingRunner runner(pool);
  SchedulerLimits limits;
  limits.max_seq_len = 256;
  limits.reserve_output_tokens = 16;
  ServingEngine engine(runner, limits);
  GenerationRequest r;
  r.prompt = {1, 2, 3};
  r.sampling.max_tokens = 4;
  r.on_event = [](const RequestEvent&) {};
  engine.submit(std::move(r));
  while (!runner.entered.load()) std::this_thread::sleep_for(1ms);
  ShutdownDeadline deadline(300ms);
  engine.shutdown(100ms);  // joins the engine thread: blocks for good
}

TEST(ShutdownDeadlineDeathTest, HungEngineStepStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(shut_down_with_a_hung_step(), ::testing::ExitedWithCode(kExitShutdownOverdue),
              "shutdown did not finish within 0.3 s .*exiting with status 4");
}

TEST(ShutdownDeadline, ShutdownInTimeDisarmsIt) {
  {
    ShutdownDeadline deadline(200ms);
    std::this_thread::sleep_for(10ms);
  }
  // Past the deadline and the process is still here: destroying it disarmed it.
  std::this_thread::sleep_for(400ms);
  SUCCEED();
}

TEST(ShutdownDeadline, ArmedFromTheGraceWithTheCloseAllowance) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto d = arm_shutdown_deadline(0.0);
        std::this_thread::sleep_for(60s);
      },
      ::testing::ExitedWithCode(kExitShutdownOverdue), "within 5.0 s");
}

}  // namespace
}  // namespace sparkglm::server
