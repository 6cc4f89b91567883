// Device faults: a sticky one (ErrorKind::kDeviceFatal) stops the engine for good and ends every
// request with its reason; any other failed step (a failed allocation) fails its own requests and
// the engine carries on.
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/backend/device_fault_injector.h"
#include "engine/core/error.h"
#include "engine/runtime/serving_engine.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

struct Outcome {
  std::mutex m;
  std::condition_variable cv;
  int tokens = 0;
  FinishReason finish = FinishReason::kNone;
  std::string error;
  bool wait() {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, std::chrono::seconds(60),
                       [&] { return finish != FinishReason::kNone; });
  }
};

GenerationRequest request(int salt, int max_tokens, Outcome& o) {
  GenerationRequest r;
  for (int i = 0; i < 12; ++i) r.prompt.push_back((i * 11 + salt * 5 + 1) % 256);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.on_event = [&o](const RequestEvent& e) {
    std::lock_guard<std::mutex> lock(o.m);
    o.tokens += int(e.tokens.size());
    if (e.finish != FinishReason::kNone) {
      o.finish = e.finish;
      o.error = e.error;
      o.cv.notify_all();
    }
  };
  return r;
}

std::unique_ptr<ModelRunner> micro_runner(ThreadPool& pool) {
  const LoadedModel& m = testing::micro_model();
  return std::make_unique<cpu::CpuModelRunner>(m.config, m.weights,
                                               cpu::CpuRunnerOptions{64, 16, 4}, pool);
}

TEST(ServingEngineFault, ADeviceFaultEndsEveryRequestWithItsReasonAndRefusesNewOnes) {
  ThreadPool pool(2);
  DeviceFaultInjector runner(micro_runner(pool), 3, throw_injected_device_fault(3));
  ServingEngine engine(runner, {});
  // The engine thread waits after its first step until all three requests are in, so the fault
  // (step 3) cannot come before a submit: on a loaded machine it did, and the late submit threw.
  std::mutex gate;
  std::condition_variable opened;
  bool all_in = false;
  engine.set_after_step([&] {
    std::unique_lock<std::mutex> lock(gate);
    opened.wait(lock, [&] { return all_in; });
  });
  std::vector<Outcome> outcomes(3);
  for (int i = 0; i < 3; ++i) engine.submit(request(i, 200, outcomes[size_t(i)]));
  {
    std::lock_guard<std::mutex> lock(gate);
    all_in = true;
  }
  opened.notify_all();
  const std::string reason = engine.wait_for_fault(std::chrono::seconds(60));
  ASSERT_NE(reason.find("injected device fault after 3 engine steps"), std::string::npos) << reason;
  for (auto& o : outcomes) {
    ASSERT_TRUE(o.wait());
    EXPECT_EQ(o.finish, FinishReason::kDeviceFault);
    EXPECT_NE(o.error.find("--inject-device-fault-after-steps"), std::string::npos) << o.error;
    EXPECT_LT(o.tokens, 200);
  }
  EXPECT_EQ(engine.stats().fatal, reason);
  Outcome late;
  try {
    engine.submit(request(7, 4, late));
    FAIL() << "a request was admitted after the device fault";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDeviceFatal);
    EXPECT_NE(e.message().find(reason), std::string::npos) << e.message();
  }
  engine.shutdown(std::chrono::milliseconds(0));  // returns at once: the loop has ended
}

// Fails one step with what a failed device allocation throws, then runs normally.
class AllocationFailsOnce : public ModelRunner {
 public:
  AllocationFailsOnce(std::unique_ptr<ModelRunner> inner, int at_step)
      : inner_(std::move(inner)), at_step_(at_step) {}
  const ModelConfig& config() const override { return inner_->config(); }
  CacheGeometry cache_geometry() const override { return inner_->cache_geometry(); }
  void forward(const ForwardBatch& b, ForwardOutput& out) override { inner_->forward(b, out); }
  void forward_mtp(const ForwardBatch& b, const std::vector<float>& h,
                   ForwardOutput& out) override {
    inner_->forward_mtp(b, h, out);
  }
  void submit(const ForwardBatch& b, const StepSampling& s) override {
    if (++steps_ == at_step_)
      throw Error(ErrorKind::kCapacity, "cudaMalloc failed: cudaErrorMemoryAllocation");
    inner_->submit(b, s);
  }
  void collect(StepResult& r) override { inner_->collect(r); }

 private:
  std::unique_ptr<ModelRunner> inner_;
  int at_step_;
  int steps_ = 0;
};

TEST(ServingEngineFault, AFailedAllocationFailsItsRequestAndTheEngineCarriesOn) {
  ThreadPool pool(2);
  AllocationFailsOnce runner(micro_runner(pool), 2);
  ServingEngine engine(runner, {});
  Outcome first;
  engine.submit(request(1, 20, first));
  ASSERT_TRUE(first.wait());
  EXPECT_EQ(first.finish, FinishReason::kError);
  EXPECT_NE(first.error.find("cudaErrorMemoryAllocation"), std::string::npos) << first.error;
  Outcome second;
  engine.submit(request(2, 6, second));
  ASSERT_TRUE(second.wait());
  EXPECT_EQ(second.finish, FinishReason::kLength);
  EXPECT_EQ(second.tokens, 6);
  EXPECT_EQ(engine.stats().fatal, "");
  EXPECT_EQ(engine.wait_for_fault(std::chrono::milliseconds(1)), "");
}

}  // namespace
}  // namespace sparkglm
