#include "engine/core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sparkglm {

// How a job is handed out. generation_ holds one 64-bit word:
//   bits 32..63  job sequence number (changes once per parallel_for)
//   bits 16..31  number of ranges in the job (kStop: the pool is shutting down)
//   bits  0..15  next unclaimed range
// Any thread, the caller included, claims a range with a compare-and-swap on the whole word, so a
// claim can never land on a finished job, and the caller runs every range that no worker has
// claimed yet instead of waiting for one. That matters on a shared machine: a worker that has lost
// its core to another process costs the caller nothing, where waiting for it cost up to a
// scheduler time slice per call. pending_ counts ranges not yet finished.
namespace {

// Set while a thread runs a range: a nested parallel_for then runs inline instead of deadlocking.
thread_local bool t_inside_range = false;

constexpr uint64_t kStop = 0xffff;

uint64_t seq_of(uint64_t w) {
  return w >> 32;
}
uint64_t parts_of(uint64_t w) {
  return (w >> 16) & 0xffff;
}
uint64_t next_of(uint64_t w) {
  return w & 0xffff;
}

// After its last range a worker polls for the next job before it sleeps: decode issues a few
// hundred short loops per token back to back, and a sleeping thread takes tens of microseconds to
// wake. It first spins with pause (about 23 ns on Zen 5), then polls with sched_yield so that a
// thread sharing its core (the machine is often oversubscribed) is not held up.
constexpr auto kPauseSpin = std::chrono::microseconds(50);
constexpr auto kYieldSpin = std::chrono::microseconds(2000);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min(threads, int(kStop) - 1);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    const uint64_t seq = seq_of(generation_.load(std::memory_order_relaxed)) + 1;
    generation_.store(seq << 32 | kStop << 16, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

// Runs range `index` of the current job (the caller must hold a claim on it).
void ThreadPool::run_range(int index) {
  const int64_t lo = int64_t(index) * job_chunk_;
  const int64_t hi = std::min(job_n_, lo + job_chunk_);
  if (lo < hi) {
    t_inside_range = true;
    (*job_)(lo, hi);
    t_inside_range = false;
  }
  pending_.fetch_sub(1, std::memory_order_acq_rel);
}

void ThreadPool::worker_loop(int /*index*/) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t w = generation_.load(std::memory_order_acquire);
    if (seq_of(w) == seen) {
      const auto start = std::chrono::steady_clock::now();
      auto waited = std::chrono::steady_clock::duration::zero();
      for (int spin = 1; seq_of(w) == seen && waited < kYieldSpin; ++spin) {
        if (waited < kPauseSpin) {
          cpu_relax();
        } else {
          std::this_thread::yield();
        }
        w = generation_.load(std::memory_order_acquire);
        if (spin % 64 == 0) waited = std::chrono::steady_clock::now() - start;
      }
      if (seq_of(w) == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || seq_of(generation_.load()) != seen; });
        w = generation_.load(std::memory_order_acquire);
      }
    }
    seen = seq_of(w);
    if (parts_of(w) == kStop) return;
    // Claim ranges of this job until none is left.
    while (seq_of(w) == seen && next_of(w) < parts_of(w)) {
      if (generation_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
        run_range(int(next_of(w)));
        w = generation_.load(std::memory_order_acquire);
      }
    }
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
  const uint64_t parts = uint64_t((n + chunk - 1) / chunk);
  // No worker can be reading these: the previous job's ranges have all finished.
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  pending_.store(int(parts), std::memory_order_relaxed);
  const uint64_t seq = seq_of(generation_.load(std::memory_order_relaxed)) + 1;
  uint64_t w = seq << 32 | parts << 16 | 1;  // range 0 is the caller's
  generation_.store(w, std::memory_order_release);
  // Wakes workers that went to sleep; without sleepers this is an uncontended lock and a check.
  { std::lock_guard<std::mutex> lock(mutex_); }
  wake_.notify_all();
  run_range(0);
  // Then every range no worker has claimed yet.
  w = generation_.load(std::memory_order_acquire);
  while (seq_of(w) == seq && next_of(w) < parts_of(w)) {
    if (generation_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
      run_range(int(next_of(w)));
      w = generation_.load(std::memory_order_acquire);
    }
  }
  // Ranges still running belong to workers; spin briefly (a range usually ends within
  // microseconds), then yield in case one shares this core.
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
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
