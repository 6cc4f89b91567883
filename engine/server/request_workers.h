#pragma once
// The threads that do a request's CPU work before it reaches the engine: reading the JSON body,
// rendering the chat template, tokenizing. On an I/O thread that work froze every connection the
// thread serves (200,000 messages held /health for 12 s); here it holds one worker. The queue is
// bounded: a request that finds it full is refused at once (503, retry later) rather than waiting
// on an I/O thread, and jobs still queued at stop() are dropped.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sparkglm::server {

class RequestWorkers {
 public:
  // `threads` >= 1 threads; at most `max_queued` jobs wait for one (0: a job runs only when a
  // thread is free).
  RequestWorkers(int threads, size_t max_queued);
  ~RequestWorkers();  // stop()
  RequestWorkers(const RequestWorkers&) = delete;
  RequestWorkers& operator=(const RequestWorkers&) = delete;

  // Queues `job`; false (and `job` is not run) when the queue is full or the workers stopped.
  bool try_post(std::function<void()> job);
  // Drops the jobs not started, waits for the running ones and joins the threads.
  void stop();

  int threads() const { return int(threads_.size()); }
  size_t max_queued() const { return max_queued_; }

 private:
  void run();

  const size_t max_queued_;
  std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  int running_ = 0;  // jobs taken by a thread and not finished
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace sparkglm::server
