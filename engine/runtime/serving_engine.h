#pragma once
// The engine loop behind sparkglm-serve: owns the scheduler, runs one step after another on its own
// thread while there is work, and is the only thread that touches the model, the pools and the
// sampler state.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/model/model_runner.h"
#include "engine/runtime/generation_request.h"
#include "engine/runtime/scheduler.h"

namespace sparkglm {

struct EngineStats {
  int waiting = 0;  // admitted requests wait for a state slot or KV blocks
  int running = 0;
  int free_blocks = 0;
  int total_blocks = 0;
  int block_size = 0;
  uint64_t steps = 0;
  uint64_t prompt_tokens = 0;  // processed since start
  uint64_t generated_tokens = 0;
  uint64_t requests_finished = 0;
  uint64_t preemptions = 0;  // running requests sent back to the queue when the pool ran out
  double last_step_seconds = 0;
  double total_step_seconds = 0;
};

class ServingEngine {
 public:
  ServingEngine(ModelRunner& runner, const SchedulerLimits& limits);
  ~ServingEngine();  // stops the loop; unfinished requests get kCancelled

  // Queues a request. A request that can never fit (prompt + max_tokens beyond max_seq_len or
  // beyond the whole KV pool) is refused with Error(kCapacity) saying the limits; one that merely
  // has to wait is queued.
  std::shared_ptr<RequestHandle> submit(GenerationRequest request);
  EngineStats stats() const;
  // Stops admitting; waits up to `grace` for running requests, then cancels the rest.
  void shutdown(std::chrono::milliseconds grace);

 private:
  void loop();
  void publish_stats();

  Scheduler scheduler_;  // touched only by the engine thread (check_fits is const and immutable)
  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  std::vector<std::pair<std::shared_ptr<RequestHandle>, GenerationRequest>> inbox_;
  EngineStats stats_;
  bool stopping_ = false;
  bool draining_ = false;
  bool idle_ = true;
  int scheduler_waiting_ = 0;
  std::thread thread_;
};

}  // namespace sparkglm
