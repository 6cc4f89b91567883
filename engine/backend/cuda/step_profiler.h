#pragma once
// Where a step's device time goes, by part of the model (--profile-steps, passed down as
// CudaRunnerOptions::profile_steps; never an environment variable): the runner marks
// the start of each part on its stream with an event; after the step, the time between a mark and
// the next is charged to the mark's part. Marks inside a captured CUDA graph become event-record
// nodes of the graph, so a replayed decode step is timed by part as it runs in production (the
// runner hands the captured parts back with replayed()); the events cost about a microsecond each.
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace sparkglm::cuda {

class StepProfiler {
 public:
  explicit StepProfiler(bool on);  // off: every call returns at once
  ~StepProfiler();
  bool on() const { return on_; }
  void mark(const char* part, cudaStream_t stream);
  // Creates events up to `n` marks ahead (before a graph capture, which may not create any).
  void reserve(size_t n);
  // Marks so far this step, and their parts from `first` on (what a graph capture recorded).
  size_t marks() const { return parts_.size(); }
  std::vector<const char*> parts_since(size_t first) const;
  // A replayed graph recorded these parts' events (the ones its capture marked, from marks() on).
  void replayed(const std::vector<const char*>& parts);
  // Synchronises and charges the step's marks to `kind` ("decode" or "prefill": reported apart;
  // the first step of each kind, cold caches and lazily loaded kernels, is left out).
  void end_step(cudaStream_t stream, const std::string& kind);
  std::string report() const;  // one line per part: total ms, ms per step, share

 private:
  bool on_ = false;
  std::vector<cudaEvent_t> pool_;
  std::vector<const char*> parts_;  // the part of each used event, in order
  std::map<std::string, std::map<std::string, double>> total_ms_;  // kind -> part -> ms
  std::map<std::string, int> steps_;                               // kind -> steps charged
  std::map<std::string, int> seen_;                                // kind -> steps ended
};

}  // namespace sparkglm::cuda
