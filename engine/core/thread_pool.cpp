#include "engine/core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace sparkglm {

namespace {
// Set while a thread runs a range: a nested parallel_for then runs inline instead of deadlocking.
thread_local bool t_inside_range = false;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_range(int index) {
  const int64_t lo = int64_t(index) * job_chunk_;
  const int64_t hi = std::min(job_n_, lo + job_chunk_);
  if (lo < hi) {
    t_inside_range = true;
    (*job_)(lo, hi);
    t_inside_range = false;
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly: engine steps issue many short loops back to back, and a sleeping worker
    // costs tens of microseconds to wake.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < 20000; ++spin) {
      std::this_thread::yield();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      gen = generation_.load();
    }
    seen = gen;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
    }
    run_range(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_parts = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (max_parts <= 1 || t_inside_range) {
    fn(0, n);
    return;
  }
  int64_t chunk = (n + max_parts - 1) / max_parts;
  chunk = (chunk + grain - 1) / grain * grain;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    pending_.store(int(workers_.size()), std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_range(0);
  while (pending_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

namespace {
int g_default_threads = 0;
std::unique_ptr<ThreadPool>& default_pool_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}
}  // namespace

ThreadPool& default_thread_pool() {
  auto& slot = default_pool_slot();
  if (!slot) slot = std::make_unique<ThreadPool>(g_default_threads);
  return *slot;
}

void set_default_thread_count(int threads) {
  g_default_threads = threads;
  default_pool_slot().reset();
}

}  // namespace sparkglm
