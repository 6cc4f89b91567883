#include "engine/backend/cuda/stream_branch.h"

#include "engine/backend/cuda/cuda_check.h"

namespace sparkglm::cuda {

StreamBranch::StreamBranch() {
  SPARKGLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
}

StreamBranch::~StreamBranch() {
  if (join_) cudaEventDestroy(join_);
  if (fork_) cudaEventDestroy(fork_);
  if (stream_) cudaStreamDestroy(stream_);
}

cudaStream_t StreamBranch::fork(cudaStream_t from) const {
  SPARKGLM_CUDA_CHECK(cudaEventRecord(fork_, from));
  SPARKGLM_CUDA_CHECK(cudaStreamWaitEvent(stream_, fork_, 0));
  return stream_;
}

void StreamBranch::close() const {
  SPARKGLM_CUDA_CHECK(cudaEventRecord(join_, stream_));
}

void StreamBranch::join_into(cudaStream_t to) const {
  SPARKGLM_CUDA_CHECK(cudaStreamWaitEvent(to, join_, 0));
}

}  // namespace sparkglm::cuda
