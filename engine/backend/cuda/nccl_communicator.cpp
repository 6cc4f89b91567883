#include "engine/backend/cuda/nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

#if SPARKGLM_HAVE_NCCL
#include <nccl.h>
#endif

namespace sparkglm::cuda {

using Clock = std::chrono::steady_clock;

#if SPARKGLM_HAVE_NCCL

bool nccl_available() {
  return true;
}

struct NcclCommunicator::Impl {
  dist::Communicator& control;
  cudaStream_t stream = nullptr;
  std::chrono::milliseconds timeout{0};
  ncclComm_t comm = nullptr;
  int rank = 0;
  int world = 1;
  bool aborted = false;

  [[noreturn]] void fail(const std::string& what) {
    if (comm && !aborted) {
      ncclCommAbort(comm);  // frees the communicator and stops its kernels from waiting
      aborted = true;
      comm = nullptr;
    }
    throw Error(ErrorKind::kDeviceFatal,
                "NCCL rank " + std::to_string(rank) + " of " + std::to_string(world) + ": " + what);
  }

  // NCCL's state of the communicator: ncclSuccess, ncclInProgress, or the error that broke it.
  ncclResult_t state() {
    ncclResult_t s = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &s);
    return r == ncclSuccess ? s : r;
  }

  // A non-blocking call returns ncclInProgress until NCCL has taken it: wait for that before the
  // next call (NCCL's rule for non-blocking communicators), watching the peers meanwhile.
  void settle(ncclResult_t r, const char* call) {
    const auto deadline = Clock::now() + timeout;
    while (r == ncclInProgress) {
      if (control.peer_lost()) fail(std::string(call) + ": a peer rank is gone");
      if (Clock::now() > deadline) fail(std::string(call) + ": not taken within the timeout");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      r = state();
    }
    if (r != ncclSuccess) fail(std::string(call) + ": " + ncclGetErrorString(r));
  }
};

NcclCommunicator::NcclCommunicator(dist::Communicator& control, int device, cudaStream_t stream,
                                   double timeout_s)
    : impl_(new Impl{control, stream, std::chrono::milliseconds(int64_t(timeout_s * 1000.0))}) {
  Impl& m = *impl_;
  m.rank = control.rank();
  m.world = control.world_size();
  SPARKGLM_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (m.rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) m.fail(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  }
  control.broadcast(&id, sizeof id, 0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&m.comm, m.world, id, m.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    m.comm = nullptr;
    m.fail(std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r));
  }
  m.settle(r == ncclInProgress ? m.state() : r, "ncclCommInitRankConfig");
}

NcclCommunicator::~NcclCommunicator() {
  Impl& m = *impl_;
  if (!m.comm || m.aborted) return;
  // A clean end when the stream is idle and every peer is there; an abort otherwise (finalize
  // would wait on a collective or a peer that may never come).
  if (cudaStreamQuery(m.stream) == cudaSuccess && !m.control.peer_lost()) {
    ncclResult_t r = ncclCommFinalize(m.comm);
    const auto deadline = Clock::now() + std::min(m.timeout, std::chrono::milliseconds(10000));
    while (r == ncclInProgress && Clock::now() < deadline && !m.control.peer_lost()) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      r = m.state();
    }
    if (r == ncclSuccess) {
      ncclCommDestroy(m.comm);
      return;
    }
  }
  ncclCommAbort(m.comm);
}

int NcclCommunicator::rank() const {
  return impl_->rank;
}
int NcclCommunicator::world_size() const {
  return impl_->world;
}

void NcclCommunicator::all_reduce_sum(float* data, size_t n) {
  Impl& m = *impl_;
  if (!m.comm) m.fail("all_reduce_sum after an abort");
  m.settle(ncclAllReduce(data, data, n, ncclFloat32, ncclSum, m.comm, m.stream), "ncclAllReduce");
}

void NcclCommunicator::broadcast(void* data, size_t bytes, int root) {
  Impl& m = *impl_;
  if (!m.comm) m.fail("broadcast after an abort");
  m.settle(ncclBroadcast(data, data, bytes, ncclUint8, root, m.comm, m.stream), "ncclBroadcast");
}

void NcclCommunicator::all_gather(const void* in, size_t bytes, void* out) {
  Impl& m = *impl_;
  if (!m.comm) m.fail("all_gather after an abort");
  m.settle(ncclAllGather(in, out, bytes, ncclUint8, m.comm, m.stream), "ncclAllGather");
}

bool NcclCommunicator::peer_lost() {
  Impl& m = *impl_;
  if (!m.comm) return true;
  const ncclResult_t s = m.state();
  return m.control.peer_lost() || (s != ncclSuccess && s != ncclInProgress);
}

void NcclCommunicator::synchronize() {
  Impl& m = *impl_;
  if (!m.comm) m.fail("synchronize after an abort");
  const auto deadline = Clock::now() + m.timeout;
  for (;;) {
    const cudaError_t q = cudaStreamQuery(m.stream);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) SPARKGLM_CUDA_CHECK(q);
    const ncclResult_t s = m.state();
    if (s != ncclSuccess && s != ncclInProgress)
      m.fail(std::string("a collective failed: ") + ncclGetErrorString(s));
    if (m.control.peer_lost()) m.fail("a peer rank is gone while a collective was running");
    if (Clock::now() > deadline) m.fail("the stream did not finish within the timeout");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

#else  // built without NCCL

bool nccl_available() {
  return false;
}

struct NcclCommunicator::Impl {};

NcclCommunicator::NcclCommunicator(dist::Communicator&, int, cudaStream_t, double) {
  throw Error(ErrorKind::kUnsupported,
              "this build has no NCCL (nccl.h and libnccl were not found when it was configured)");
}
NcclCommunicator::~NcclCommunicator() = default;
int NcclCommunicator::rank() const {
  return 0;
}
int NcclCommunicator::world_size() const {
  return 1;
}
void NcclCommunicator::all_reduce_sum(float*, size_t) {}
void NcclCommunicator::broadcast(void*, size_t, int) {}
void NcclCommunicator::all_gather(const void*, size_t, void*) {}
bool NcclCommunicator::peer_lost() {
  return true;
}
void NcclCommunicator::synchronize() {}

#endif

}  // namespace sparkglm::cuda
