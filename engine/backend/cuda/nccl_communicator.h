#pragma once
// The data-plane collectives of tensor-parallel CUDA ranks, over NCCL (docs/parallel.md). The
// control plane (who runs which step, the settings fingerprint, a lost rank) stays on the socket
// communicator the ranks already share; NCCL's unique id travels over it at start.
//
// Buffers are device pointers. A collective is enqueued on the stream given at construction and
// returns at once, as every other kernel of the step does; `synchronize()` waits for the stream.
// Unlike cudaStreamSynchronize it never waits forever: NCCL runs non-blocking, and while the
// stream is busy the wait polls NCCL's asynchronous error and the control connection. A peer whose
// process is gone (its socket closed) or a timeout aborts the communicator and throws
// Error(kDeviceFatal) naming the cause, so the server's device-fault path (503, exit non-zero)
// takes over instead of a hang.
//
// Order of additions: NCCL's ring adds each chunk in ring order and then hands the finished chunk
// to every rank, so every rank holds the same bits, and a run with the same world size, message
// size and NCCL settings repeats exactly. For two ranks the order does not matter (a + b = b + a in
// floating point). It is not the socket communicator's rank order for three ranks or more: TP
// results there match across runs, not across transports.
#include <cuda_runtime.h>

#include <memory>

#include "engine/dist/communicator.h"

namespace sparkglm::cuda {

// Whether this build links NCCL (SPARKGLM_HAVE_NCCL); without it the constructor throws.
bool nccl_available();

class NcclCommunicator : public dist::Communicator {
 public:
  // Joins the NCCL group of `control`'s ranks (same rank, same world size) on `device`, enqueueing
  // on `stream`. Rank 0 makes the unique id and broadcasts it over `control`; every rank must call
  // this at the same point. `timeout_s` bounds initialisation and every synchronize().
  // Throws Error(kUnsupported) without NCCL, Error(kDeviceFatal) when the group cannot form.
  NcclCommunicator(dist::Communicator& control, int device, cudaStream_t stream, double timeout_s);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int world_size() const override;
  void all_reduce_sum(float* data, size_t n) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void all_gather(const void* in, size_t bytes, void* out) override;
  // The control connection reports a lost peer, or NCCL an asynchronous error. Never blocks.
  bool peer_lost() override;

  // Waits until the stream has run every collective enqueued so far (and what came before them).
  void synchronize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparkglm::cuda
