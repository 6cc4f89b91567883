#pragma once
// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so a pool
// of N threads starts N - 1 workers. Work is split into contiguous ranges: which thread computes a
// range never changes the arithmetic inside it, so results do not depend on the thread count.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sparkglm {

class ThreadPool {
 public:
  // threads <= 0 means one per hardware thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls fn(lo, hi) over [0, n) split into at most size() contiguous ranges, each a multiple of
  // `grain` items (the last may be shorter). Runs inline when n <= grain.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);
  void run_range(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stopping_ = false;
  // The job being run.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
};

// The process-wide pool, created on first use with `threads` (0 = hardware threads).
ThreadPool& default_thread_pool();
void set_default_thread_count(int threads);

}  // namespace sparkglm
