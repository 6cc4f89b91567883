#include "engine/backend/cuda/step_profiler.h"

#include <algorithm>
#include <cstdio>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

StepProfiler::StepProfiler(bool on) : on_(on) {}

StepProfiler::~StepProfiler() {
  if (on_ && !steps_.empty()) std::fputs(report().c_str(), stderr);
  for (cudaEvent_t e : pool_) cudaEventDestroy(e);
}

void StepProfiler::mark(const char* part, cudaStream_t stream) {
  if (!on_) return;
  if (parts_.size() == pool_.size()) {
    cudaEvent_t e;
    SPARKGLM_CUDA_CHECK(cudaEventCreate(&e));
    pool_.push_back(e);
  }
  // Inside a stream capture a plain record only orders the graph's nodes; an external one
  // becomes an event-record node that each replay records (what the timing needs).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SPARKGLM_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  SPARKGLM_CUDA_CHECK(cudaEventRecordWithFlags(
      pool_[parts_.size()], stream,
      capture == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault));
  parts_.push_back(part);
}

void StepProfiler::reserve(size_t n) {
  if (!on_) return;
  while (pool_.size() < parts_.size() + n) {
    cudaEvent_t e;
    SPARKGLM_CUDA_CHECK(cudaEventCreate(&e));
    pool_.push_back(e);
  }
}

std::vector<const char*> StepProfiler::parts_since(size_t first) const {
  return {parts_.begin() + int64_t(std::min(first, parts_.size())), parts_.end()};
}

void StepProfiler::replayed(const std::vector<const char*>& parts) {
  if (!on_) return;
  SPARKGLM_ASSERT(parts_.size() + parts.size() <= pool_.size(),
                  "StepProfiler::replayed: the graph's events were not captured from here");
  parts_.insert(parts_.end(), parts.begin(), parts.end());
}

void StepProfiler::end_step(cudaStream_t stream, const std::string& kind) {
  if (!on_ || parts_.empty()) return;
  mark("end", stream);
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (seen_[kind]++ > 0) {
    for (size_t i = 0; i + 1 < parts_.size(); ++i) {
      float ms = 0;
      SPARKGLM_CUDA_CHECK(cudaEventElapsedTime(&ms, pool_[i], pool_[i + 1]));
      total_ms_[kind][parts_[i]] += ms;
    }
    ++steps_[kind];
  }
  parts_.clear();
}

std::string StepProfiler::report() const {
  std::string out;
  char line[160];
  for (const auto& [kind, parts] : total_ms_) {
    const int steps = steps_.at(kind);
    double all = 0;
    for (const auto& [part, ms] : parts) all += ms;
    out += "device time by part over " + std::to_string(steps) + " " + kind +
           " steps (the first left out):\n";
    for (const auto& [part, ms] : parts) {
      std::snprintf(line, sizeof line, "  %-12s %10.3f ms total %9.4f ms/step %5.1f %%\n",
                    part.c_str(), ms, ms / steps, all > 0 ? 100.0 * ms / all : 0.0);
      out += line;
    }
  }
  return out;
}

}  // namespace sparkglm::cuda
