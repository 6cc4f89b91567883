#pragma once
// The ranks of one sparkglm-serve run as the server sees them (docs/parallel.md): every rank is a
// tensor-parallel rank (--tp-size N = --world-size N). Without --rank on the command line, this
// process is rank 0 and starts ranks 1..N-1 on this host (rank_processes.h); with --rank R, it is
// rank R of a run whose other ranks were started elsewhere (several hosts). Either way the ranks
// meet at --master-addr:--master-port and compare fingerprints (rank_bootstrap.h).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/dist/rank_processes.h"
#include "engine/dist/socket_communicator.h"

namespace sparkglm::dist {

struct RankSettings {
  int world_size = 1;  // ranks in the run (1: no parallelism)
  int rank = 0;
  bool launch = false;  // start ranks 1..world_size-1 here (no --rank was given)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0: any free port (launch only)
};

class RankGroup {
 public:
  // Starts the other ranks when settings.launch, then joins the run. `args` are this process's
  // arguments (without argv[0]), passed on to the ranks it starts. Throws what join_ranks throws.
  RankGroup(const RankSettings& settings, const std::vector<std::string>& args,
            const nlohmann::json& fingerprint);

  Communicator& comm() { return *comm_; }
  int rank() const { return comm_->rank(); }
  // "" while every rank is there; otherwise which is gone and how. Does not block.
  std::string lost();
  // After rank 0 told the others to stop: waits for the ranks it started; true when all exited 0.
  bool wait_for_ranks();

 private:
  std::unique_ptr<RankProcesses> children_;  // launch mode only
  std::unique_ptr<SocketCommunicator> comm_;
};

}  // namespace sparkglm::dist
