#pragma once
// A second stream for work that runs beside a step's own: fork() makes it wait for what the step
// queued so far, close() marks the end of what was queued on it since, and join_into() makes the
// step wait for that. Captured, the two become branches of the step's graph (the branch joins the
// capture through its fork, and must be joined back before the capture ends). Owns its stream and
// its two events.
#include <cuda_runtime.h>

namespace sparkglm::cuda {

class StreamBranch {
 public:
  StreamBranch();
  ~StreamBranch();
  StreamBranch(const StreamBranch&) = delete;
  StreamBranch& operator=(const StreamBranch&) = delete;

  cudaStream_t fork(cudaStream_t from) const;  // the branch's stream, after what `from` queued
  void close() const;  // the branch's work so far is what join_into waits for
  void join_into(cudaStream_t to) const;
  cudaStream_t stream() const { return stream_; }
  cudaEvent_t closed() const { return join_; }  // for a caller that waits for it itself

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
};

}  // namespace sparkglm::cuda
