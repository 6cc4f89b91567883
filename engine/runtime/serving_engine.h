#pragma once
// The engine loop behind sparkglm-serve: owns the scheduler, runs one step after another on its own
// thread while there is work, and is the only thread that touches the model, the pools and the
// sampler state.
//
// Failures: a step that fails fails its requests (kError) and the engine carries on; a failed
// device allocation is such a failure. A device fault (an Error of kind kDeviceFatal: a sticky
// CUDA error, after which no later step can succeed) stops the engine for good: every request in
// flight or queued ends with kDeviceFault, later submissions are refused with kDeviceFatal, and
// stats().fatal says why, so that the server can answer 503 and exit for its supervisor.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
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
  // Prefix cache (zero when off): admissions that resumed from it and the prompt tokens they
  // skipped, cached blocks reused for new ones, KDA snapshots saved and evicted, blocks held
  // cached by no request.
  uint64_t prefix_hits = 0, prefix_hit_tokens = 0, prefix_block_evictions = 0;
  uint64_t prefix_snapshots_saved = 0, prefix_snapshot_evictions = 0;
  int prefix_cached_blocks = 0;
  PrefixCacheCounters prefix;       // every counter of the cache: answers, the disk tier
  SpeculationCounters speculation;  // --speculative-tokens: drafts and acceptance by position
  double last_step_seconds = 0;
  double total_step_seconds = 0;
  StepHostTimes host;  // the engine thread's time in submit, collect and drafting (scheduler.h)
  std::string fatal;   // empty while the engine runs; the device fault that stopped it
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
  // Called on the engine thread after every step that ran (its token events are delivered by
  // then): the server runs its ready I/O handlers there, so that tokens leave as they are made.
  void set_after_step(std::function<void()> fn);
  // Waits up to `timeout` for a device fault; returns its reason, or "" when none came.
  std::string wait_for_fault(std::chrono::milliseconds timeout) const;
  // The prefix cache's disk tier, for the log ("" without one); fixed at construction.
  std::string disk_tier_summary() const;

 private:
  void loop();
  void publish_stats();
  // Engine thread: ends everything queued or running with `reason` (and `error`).
  void end_all(FinishReason reason, const std::string& error);

  Scheduler scheduler_;  // touched only by the engine thread (check_fits is const and immutable)
  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  mutable std::condition_variable faulted_;  // signalled once, when fatal_ is set
  std::vector<std::pair<std::shared_ptr<RequestHandle>, GenerationRequest>> inbox_;
  EngineStats stats_;
  bool stopping_ = false;
  std::string fatal_;  // set once, by the engine thread, on a device fault
  std::function<void()> after_step_;
  bool draining_ = false;
  bool idle_ = true;
  int scheduler_waiting_ = 0;
  std::thread thread_;
};

}  // namespace sparkglm
