#pragma once
// The collectives that tensor- and expert-parallel ranks run inside a step (docs/parallel.md).
// Every rank calls the same collectives in the same order with the same sizes; a call returns when
// this rank's part is done. The reduction order is fixed (rank 0 + rank 1, then + rank 2, ...) and
// every rank receives the same bits, so a run is repeatable and the ranks never drift apart.
//
// Buffers live where the implementation works: host memory for the socket one (the CPU backend);
// an NCCL one would take device pointers and enqueue on the stream of the runner that owns it.
//
// A rank that is gone (its process died, its connection closed) makes the collective throw
// Error(kDeviceFatal) naming the rank: the run cannot continue, and the engine's device-fault path
// (503 to every request, exit non-zero) takes the server down. An implementation never waits
// forever on a peer whose process has exited.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sparkglm::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // data [n] becomes the elementwise sum over ranks, added in rank order; identical on every rank.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  // root's data [bytes] is copied to every other rank's data; every rank passes the same size.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // in [bytes] of every rank into out [world_size, bytes], in rank order.
  virtual void all_gather(const void* in, size_t bytes, void* out) = 0;
  // True when a peer's connection has closed (its process is gone), without blocking: lets an
  // idle rank 0 notice a lost rank before the next step.
  virtual bool peer_lost() = 0;
};

// A message whose size only the root knows: root's `message` on every rank. A size above
// max_bytes is Error(kDeviceFatal): the ranks no longer agree on what they exchange.
std::vector<uint8_t> broadcast_message(Communicator& comm, std::vector<uint8_t> message, int root,
                                       size_t max_bytes);

// Every rank's string, in rank order (each at most max_bytes, else Error(kInvalidArgument)).
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine,
                                            size_t max_bytes);

}  // namespace sparkglm::dist
