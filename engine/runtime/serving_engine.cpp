#include "engine/runtime/serving_engine.h"

#include <pthread.h>

#include <cstdio>

#include "engine/core/error.h"

namespace sparkglm {

ServingEngine::ServingEngine(ModelRunner& runner, const SchedulerLimits& limits)
    : scheduler_(runner, limits) {
  publish_stats();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "sparkglm-engine");  // for per-thread CPU accounting
    loop();
  });
}

ServingEngine::~ServingEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestHandle> ServingEngine::submit(GenerationRequest request) {
  static std::atomic<uint64_t> next_id{1};
  scheduler_.check_fits(request);  // throws if the request can never fit
  auto handle = std::make_shared<RequestHandle>(next_id.fetch_add(1));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!fatal_.empty())
      throw Error(ErrorKind::kDeviceFatal, "the engine stopped on a device fault: " + fatal_);
    if (stopping_ || draining_) throw Error(ErrorKind::kCapacity, "the server is shutting down");
    inbox_.emplace_back(handle, std::move(request));
    stats_.waiting = int(inbox_.size()) + scheduler_waiting_;
  }
  wake_.notify_all();
  return handle;
}

EngineStats ServingEngine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string ServingEngine::disk_tier_summary() const {
  const PrefixCache* cache = scheduler_.prefix_cache();  // set before the engine thread starts
  return cache ? cache->disk_summary() : "";
}

void ServingEngine::publish_stats() {
  EngineStats s;
  s.running = scheduler_.running();
  s.free_blocks = scheduler_.blocks().num_free();
  s.total_blocks = scheduler_.blocks().num_blocks();
  s.block_size = scheduler_.geometry().block_size;
  const SchedulerCounters c = scheduler_.counters();
  s.steps = c.steps;
  s.prompt_tokens = c.prompt_tokens;
  s.generated_tokens = c.generated_tokens;
  s.requests_finished = c.finished;
  s.preemptions = c.preemptions;
  s.prefix_hits = c.prefix_hits;
  s.prefix_hit_tokens = c.prefix_hit_tokens;
  s.prefix_block_evictions = c.block_evictions;
  s.prefix_snapshots_saved = c.snapshots_saved;
  s.prefix_snapshot_evictions = c.snapshot_evictions;
  s.prefix_cached_blocks = scheduler_.blocks().num_idle_cached();
  s.prefix = c.prefix;
  s.speculation = c.speculation;
  s.last_step_seconds = c.last_step_seconds;
  s.total_step_seconds = c.total_step_seconds;
  s.host = c.host;
  std::lock_guard<std::mutex> lock(mutex_);
  s.fatal = fatal_;
  scheduler_waiting_ = scheduler_.waiting();
  s.waiting = scheduler_waiting_ + int(inbox_.size());
  idle_ = scheduler_.idle() && inbox_.empty();
  stats_ = s;
}

void ServingEngine::loop() {
  for (;;) {
    std::vector<std::pair<std::shared_ptr<RequestHandle>, GenerationRequest>> arrived;
    std::function<void()> after_step;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // With nothing to run, sleep until a request arrives; cancellation flags are polled by
      // each step, so there is nothing else to wait for.
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !scheduler_.idle(); });
      if (stopping_) break;
      arrived.swap(inbox_);
      // Not idle from here until a step says so: shutdown's grace must not end because the
      // requests it waits for have left the inbox but not yet reached a published step.
      if (!arrived.empty()) idle_ = false;
      after_step = after_step_;
    }
    for (auto& [handle, request] : arrived) {
      auto on_event = request.on_event;
      try {
        scheduler_.add(handle, std::move(request));
      } catch (const std::exception& e) {
        RequestEvent ev;
        ev.finish = FinishReason::kError;
        ev.error = e.what();
        if (on_event) on_event(ev);
      }
    }
    try {
      scheduler_.step();
    } catch (const std::exception& e) {
      if (is_device_fatal(e)) {
        // No later step can succeed: the engine stops here, and says why.
        std::fprintf(stderr, "sparkglm-serve: engine fatal: %s\n", e.what());
        {
          std::lock_guard<std::mutex> lock(mutex_);
          fatal_ = e.what();
          stats_.fatal = fatal_;  // /health says why before any request hears of the fault
        }
        end_all(FinishReason::kDeviceFault, e.what());
        faulted_.notify_all();
        return;
      }
      std::fprintf(stderr, "sparkglm-serve: engine step failed: %s\n", e.what());
      scheduler_.cancel_all(FinishReason::kError);
    }
    if (after_step) after_step();
    publish_stats();
  }
  end_all(FinishReason::kCancelled, "");
}

void ServingEngine::end_all(FinishReason reason, const std::string& error) {
  // Whatever is left, queued or running, ends now. With the engine thread gone, a request that
  // was submitted a moment ago would wait forever: submit() refuses new ones before this runs
  // (stopping_ or fatal_ is set), so the inbox is complete.
  std::vector<std::pair<std::shared_ptr<RequestHandle>, GenerationRequest>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(inbox_);
  }
  for (auto& [handle, request] : left) {
    RequestEvent ev;
    ev.finish = reason;
    ev.error = error;
    ev.prompt_tokens = int(request.prompt.size());
    if (request.on_event) request.on_event(ev);
  }
  scheduler_.cancel_all(reason, error);
  publish_stats();
}

void ServingEngine::set_after_step(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  after_step_ = std::move(fn);
}

std::string ServingEngine::wait_for_fault(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  faulted_.wait_for(lock, timeout, [&] { return !fatal_.empty(); });
  return fatal_;
}

void ServingEngine::shutdown(std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_ = true;
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if ((idle_ && inbox_.empty()) || std::chrono::steady_clock::now() >= deadline) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sparkglm
