#include "harness/load_runner.h"

#include <algorithm>
#include <atomic>
#include <latch>
#include <mutex>
#include <numeric>
#include <thread>

#include "engine/core/error.h"
#include "harness/sse_client.h"

namespace sparkglm::harness {

namespace {

using Kind = ArrivalSchedule::Kind;

// Collects records by spec index and reports progress one record at a time.
class RecordSink {
 public:
  RecordSink(size_t n, ProgressCallback progress) : records_(n), progress_(std::move(progress)) {}

  void put(size_t i, RequestRecord r) {
    std::lock_guard<std::mutex> lock(mutex_);
    records_[i] = std::move(r);
    ++done_;
    if (progress_) progress_(records_[i], done_, records_.size());
  }
  std::vector<RequestRecord> take() { return std::move(records_); }

 private:
  std::mutex mutex_;
  std::vector<RequestRecord> records_;
  size_t done_ = 0;
  ProgressCallback progress_;
};

// Joins every started thread even when starting a later one throws.
class ThreadGroup {
 public:
  ~ThreadGroup() { join(); }
  template <typename F>
  void start(F&& f) {
    threads_.emplace_back(std::forward<F>(f));
  }
  void join() {
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

 private:
  std::vector<std::thread> threads_;
};

RequestRecord client_failure(const RequestSpec& spec, const std::string& arm,
                             Clock::time_point epoch, const std::string& what) {
  RequestRecord r;
  r.arm = arm;
  r.workload = spec.workload;
  r.case_id = spec.case_id;
  r.repetition = spec.repetition;
  r.index = spec.index;
  r.marker = spec.marker;
  r.start_s = r.end_s = std::chrono::duration<double>(Clock::now() - epoch).count();
  r.error = "client failure: " + what;
  return r;
}

}  // namespace

std::vector<RequestRecord> run_load(const std::string& base_url,
                                    const std::vector<RequestSpec>& specs,
                                    const ArrivalSchedule& schedule, const std::string& arm,
                                    Clock::time_point epoch, ProgressCallback progress) {
  if (schedule.concurrency < 1 &&
      (schedule.kind == Kind::kClosedLoop || schedule.kind == Kind::kBarrier))
    throw Error(ErrorKind::kInvalidConfig,
                "arrival schedule field `concurrency`: expected an integer >= 1");
  RecordSink sink(specs.size(), std::move(progress));
  // Sends spec i; `wait` (for the barrier) runs after the request is built, before it is sent.
  const auto send = [&](size_t i, const std::function<void()>& wait) {
    RequestRecord r;
    std::unique_ptr<SseRequest> request;
    try {
      request = std::make_unique<SseRequest>(base_url, specs[i], arm, epoch);
    } catch (const std::exception& e) {  // the client itself failed (no handle, no memory)
      r = client_failure(specs[i], arm, epoch, e.what());
    }
    if (wait) wait();
    if (request) {
      try {
        r = request->perform();
      } catch (const std::exception& e) {
        r = client_failure(specs[i], arm, epoch, e.what());
      }
    }
    sink.put(i, std::move(r));
  };
  const size_t n = specs.size();
  const size_t c = std::min(n, size_t(std::max(1, schedule.concurrency)));

  switch (schedule.kind) {
    case Kind::kClosedLoop: {
      std::atomic<size_t> next{0};
      ThreadGroup workers;
      for (size_t w = 0; w < c; ++w)
        workers.start([&] {
          for (size_t i = next++; i < n; i = next++) send(i, {});
        });
      break;
    }
    case Kind::kBarrier: {
      for (size_t group = 0; group < n; group += c) {
        const size_t size = std::min(c, n - group);
        // Every thread exists and has built its request before any request leaves, so neither
        // thread creation nor request building staggers the start.
        std::latch ready(ptrdiff_t(size) + 1);
        ThreadGroup workers;
        for (size_t i = group; i < group + size; ++i) {
          try {
            workers.start([&, i] { send(i, [&] { ready.arrive_and_wait(); }); });
          } catch (...) {  // release the threads already waiting, so that joining them ends
            ready.count_down(ptrdiff_t(group + size - i) + 1);
            throw;
          }
        }
        ready.arrive_and_wait();
        workers.join();
      }
      break;
    }
    case Kind::kStaggered:
    case Kind::kPoisson:
    case Kind::kGamma: {
      for (const RequestSpec& s : specs)
        if (!(s.offset_s >= 0))
          throw Error(ErrorKind::kInvalidArgument, "request spec `offset_s` of case " + s.case_id +
                                                       " index " + std::to_string(s.index) +
                                                       ": expected a number >= 0");
      std::vector<size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return specs[a].offset_s < specs[b].offset_s; });
      // One thread per request, created at its send time: as many threads as streams in flight.
      const Clock::time_point begin = Clock::now();
      ThreadGroup senders;
      for (size_t i : order) {
        std::this_thread::sleep_until(begin +
                                      std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(specs[i].offset_s)));
        senders.start([&, i] { send(i, {}); });
      }
      break;
    }
  }
  return sink.take();
}

void assign_offsets(std::vector<RequestSpec>& specs, const ArrivalSchedule& schedule) {
  const std::vector<double> offsets = arrival_offsets(schedule, int32_t(specs.size()));
  for (size_t i = 0; i < specs.size(); ++i) specs[i].offset_s = offsets[i];
}

}  // namespace sparkglm::harness
