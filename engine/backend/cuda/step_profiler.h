#pragma once
// Where a step's device time goes, by part of the model (SPARKGLM_CUDA_PROFILE=1): the runner marks
// the start of each part on its stream with an event; after the step, the time between a mark and
// the next is charged to the mark's part. Marks cost a few microseconds, so profiled steps run
// eagerly (no CUDA graph) and are slower than unprofiled ones; the shares are what it is for.
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

namespace sparkglm::cuda {

class StepProfiler {
 public:
  StepProfiler();  // on when the environment sets SPARKGLM_CUDA_PROFILE
  ~StepProfiler();
  bool on() const { return on_; }
  void mark(const char* part, cudaStream_t stream);
  void end_step(cudaStream_t stream);  // synchronises and charges the step's marks
  std::string report() const;          // one line per part: total ms, ms per step, share

 private:
  bool on_ = false;
  std::vector<cudaEvent_t> pool_;
  std::vector<const char*> parts_;  // the part of each used event, in order
  std::map<std::string, double> total_ms_;
  int steps_ = 0;
};

}  // namespace sparkglm::cuda
