// Device faults on a real GPU: an illegal address provoked by the test hook
// (--inject-device-fault-after-steps) reaches the engine as ErrorKind::kDeviceFatal through the
// CUDA runner's own checks, stops the engine and ends the request with kDeviceFault; a failed
// allocation is kCapacity, clears itself, and the runner goes on serving.
//
// The fault poisons the CUDA context of its process for good, so that case runs in a child
// process (a gtest death test in the "threadsafe" style, which re-executes the binary): the other
// tests of this binary keep a healthy device.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/runner_factory.h"
#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/runtime/serving_engine.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

RunnerRequest tinyglm_on_device(int64_t fault_after_steps) {
  RunnerRequest r;
  r.device = "cuda";
  r.preset = "tinyglm";
  r.max_num_seqs = 2;
  r.max_seq_len = 1024;
  r.max_tokens_per_step = 512;
  r.kv_cache_bytes = size_t(256) << 20;
  r.inject_device_fault_after_steps = fault_after_steps;
  return r;
}

// The scheduler's limits for the runner above: two sequences, as its state slots.
SchedulerLimits two_sequences() {
  SchedulerLimits l;
  l.max_num_seqs = 2;
  l.max_batch_size = 2;
  l.max_prefill_tokens = 512;
  l.max_seq_len = 1024;
  return l;
}

struct Outcome {
  std::mutex m;
  std::condition_variable cv;
  int tokens = 0;
  FinishReason finish = FinishReason::kNone;
  std::string error;
};

GenerationRequest greedy(int max_tokens, Outcome& o) {
  GenerationRequest r;
  for (int i = 0; i < 24; ++i) r.prompt.push_back((i * 37 + 5) % 256);  // byte-tokenizer ids
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.on_event = [&o](const RequestEvent& e) {
    std::lock_guard<std::mutex> lock(o.m);
    o.tokens += int(e.tokens.size());
    if (e.finish == FinishReason::kNone) return;
    o.finish = e.finish;
    o.error = e.error;
    o.cv.notify_all();
  };
  return r;
}

bool wait(Outcome& o) {
  std::unique_lock<std::mutex> lock(o.m);
  return o.cv.wait_for(lock, std::chrono::seconds(120),
                       [&] { return o.finish != FinishReason::kNone; });
}

TEST(DeviceFaultCuda, StickyErrorsAreFatalAndAnAllocationFailureIsNot) {
  for (cudaError_t e :
       {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorHardwareStackError,
        cudaErrorIllegalInstruction, cudaErrorMisalignedAddress, cudaErrorInvalidAddressSpace,
        cudaErrorInvalidPc, cudaErrorECCUncorrectable, cudaErrorAssert, cudaErrorLaunchTimeout}) {
    EXPECT_TRUE(cuda::is_sticky(e)) << cudaGetErrorName(e);
    EXPECT_EQ(cuda::error_kind(e), ErrorKind::kDeviceFatal) << cudaGetErrorName(e);
  }
  EXPECT_FALSE(cuda::is_sticky(cudaErrorMemoryAllocation));
  EXPECT_EQ(cuda::error_kind(cudaErrorMemoryAllocation), ErrorKind::kCapacity);
  EXPECT_EQ(cuda::error_kind(cudaErrorInvalidValue), ErrorKind::kUnsupported);
}

// In the child: serve one request on a runner that faults after 3 steps; exit 0 when the
// engine saw a device fault caused by an illegal address, else say what happened and exit 1.
void serve_through_an_illegal_address() {
  BuiltRunner b = build_runner(tinyglm_on_device(3), default_thread_pool());
  ServingEngine engine(*b.runner, two_sequences());
  Outcome o;
  engine.submit(greedy(64, o));
  const std::string reason = engine.wait_for_fault(std::chrono::seconds(120));
  const bool waited = wait(o);
  const bool ok = waited && o.finish == FinishReason::kDeviceFault &&
                  reason.find("cudaErrorIllegalAddress") != std::string::npos &&
                  reason.find("device fault") != std::string::npos && o.error == reason;
  std::fprintf(stderr, "finish %s after %d tokens; reason: %s\n", to_string(o.finish), o.tokens,
               reason.c_str());
  if (ok) std::fprintf(stderr, "the engine stopped on the illegal address\n");
  std::_Exit(ok ? 0 : 1);  // no destructors: the context is poisoned
}

TEST(DeviceFaultCuda, AnIllegalAddressStopsTheEngineWithTheStickyError) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(serve_through_an_illegal_address(), ::testing::ExitedWithCode(0),
              "the engine stopped on the illegal address");
}

TEST(DeviceFaultCuda, AFailedAllocationIsRecoverableAndTheRunnerGoesOn) {
  if (!cuda_test::have_device()) GTEST_SKIP() << "no CUDA device";
  BuiltRunner b = build_runner(tinyglm_on_device(0), default_thread_pool());
  void* huge = nullptr;
  try {
    SPARKGLM_CUDA_CHECK(cudaMalloc(&huge, size_t(1) << 50));  // a petabyte: no device has it
    FAIL() << "a 1 PiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kCapacity) << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaErrorMemoryAllocation"), std::string::npos);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // cleared: the next launch check is not misled
  ServingEngine engine(*b.runner, two_sequences());
  Outcome o;
  engine.submit(greedy(16, o));
  ASSERT_TRUE(wait(o));
  EXPECT_EQ(o.finish, FinishReason::kLength) << o.error;
  EXPECT_EQ(o.tokens, 16);
  EXPECT_EQ(engine.stats().fatal, "");
}

}  // namespace
}  // namespace sparkglm
