#include "engine/server/request_workers.h"

#include <pthread.h>

#include <algorithm>
#include <exception>
#include <string>

#include "engine/server/server_log.h"

namespace sparkglm::server {

RequestWorkers::RequestWorkers(int threads, size_t max_queued) : max_queued_(max_queued) {
  const int n = std::max(1, threads);
  threads_.reserve(size_t(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { run(); });
}

RequestWorkers::~RequestWorkers() {
  stop();
}

bool RequestWorkers::try_post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    // Every thread may hold a job, and max_queued_ more may wait.
    if (queue_.size() + size_t(running_) + 1 > threads_.size() + max_queued_) return false;
    queue_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

void RequestWorkers::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void RequestWorkers::run() {
  pthread_setname_np(pthread_self(), "sparkglm-req");  // for per-thread CPU accounting
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    // A job answers its own errors; one that escapes loses that request, not the thread.
    try {
      job();
    } catch (const std::exception& e) {
      log_line(std::string("internal error in a request worker: ") + e.what());
    }
    job = nullptr;  // its captures (the exchange) go before the next wait
    lock.lock();
    --running_;
  }
}

}  // namespace sparkglm::server
