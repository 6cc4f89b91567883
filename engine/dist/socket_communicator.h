#pragma once
// Collectives over stream sockets in a star: rank 0 holds one connection to every other rank, each
// other rank one connection to rank 0 (TCP between hosts, AF_UNIX pairs inside one process).
//
//   all_reduce_sum: every rank r > 0 sends its buffer; rank 0 adds them to its own in rank order
//                   (((r0 + r1) + r2) + ...), whatever order they arrive in, and sends the sum
//                   back, so every rank holds the same bits and a run repeats exactly.
//   broadcast:      the root sends (through rank 0 when the root is another rank).
//   all_gather:     rank 0 collects every part and sends the whole back.
// Rank 0 moves (world_size - 1) x 2 buffers per collective: fine for the CPU backend's test sizes,
// not a transport for GPUs (docs/parallel.md: NCCL sits behind the same interface there).
//
// A peer whose process exits closes its socket, so a read returns end-of-file and the collective
// throws Error(kDeviceFatal) naming the rank instead of waiting. A peer that is alive but stopped
// (SIGSTOP, a debugger) is waited for.
#include <memory>
#include <vector>

#include "engine/dist/communicator.h"

namespace sparkglm::dist {

class SocketCommunicator : public Communicator {
 public:
  // Takes ownership of connected sockets: on rank 0, peers[r] is rank r's (peers[0] unused, -1);
  // on another rank, peers[0] is rank 0's and the rest are -1.
  SocketCommunicator(int rank, std::vector<int> peers);
  ~SocketCommunicator() override;
  SocketCommunicator(const SocketCommunicator&) = delete;
  SocketCommunicator& operator=(const SocketCommunicator&) = delete;

  // world_size ranks of one process joined by AF_UNIX socket pairs (each used from its own thread).
  static std::vector<std::unique_ptr<SocketCommunicator>> local_group(int world_size);

  int rank() const override { return rank_; }
  int world_size() const override { return int(peers_.size()); }
  void all_reduce_sum(float* data, size_t n) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void all_gather(const void* in, size_t bytes, void* out) override;
  bool peer_lost() override;

 private:
  void send_to(int peer, const void* data, size_t bytes);
  void recv_from(int peer, void* data, size_t bytes);

  int rank_;
  std::vector<int> peers_;      // [world_size] socket per peer rank, -1 where none
  std::vector<float> scratch_;  // rank 0: one peer's buffer while reducing
};

}  // namespace sparkglm::dist
