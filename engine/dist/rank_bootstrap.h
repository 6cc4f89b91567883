#pragma once
// How the ranks of one run find each other (ARCHITECTURE.md, Distributed): rank 0 listens on
// --master-addr:--master-port; every other rank connects (retrying until rank 0 listens) and
// sends its rank, the world size and its settings fingerprint (rank_fingerprint.h). Rank 0 admits
// each rank whose fingerprint equals its own and refuses the first that differs, naming the
// difference, on both sides: neither starts. The connections then carry the collectives
// (socket_communicator.h). Every read is bounded in size and time.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/dist/socket_communicator.h"

namespace sparkglm::dist {

struct RankAddress {
  int world_size = 1;
  int rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double timeout_s = 300;  // to gather every rank (a rank may still be loading its weights)
};

// Rank 0's listening socket, bound before any rank starts; port 0 picks a free port.
// Error(kIo) naming the address when it cannot be bound.
int listen_for_ranks(const std::string& addr, int port);
int listening_port(int fd);

// Joins the run. On rank 0 `listen_fd` is listen_for_ranks' socket (taken and closed; -1: bound
// here from `address`). Error(kInvalidArgument) for a fingerprint, rank or world size that does
// not match (the message names it); Error(kIo) when the ranks do not meet within the timeout.
std::unique_ptr<SocketCommunicator> join_ranks(const RankAddress& address,
                                               const nlohmann::json& fingerprint,
                                               int listen_fd = -1);

}  // namespace sparkglm::dist
