#pragma once
// `sparkglm-serve --tp-size N` on one host: this process becomes rank 0 and starts ranks 1..N-1
// as children running the same binary with the same arguments plus --rank and --master-port, then
// watches them. A child that exits is reported (exited()) so that rank 0 stops serving; a child
// is killed when rank 0 dies (PR_SET_PDEATHSIG), so no rank outlives the server.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace sparkglm::dist {

// The arguments of rank r: `args` without any --rank / --master-port, then those two.
std::vector<std::string> rank_args(const std::vector<std::string>& args, int rank, int port);

class RankProcesses {
 public:
  // Starts ranks 1..world_size-1. Error(kIo) when a process cannot be started.
  RankProcesses(const std::vector<std::string>& args, int world_size, int master_port);
  ~RankProcesses();  // kills the ranks still running
  RankProcesses(const RankProcesses&) = delete;
  RankProcesses& operator=(const RankProcesses&) = delete;

  // "" while every rank runs; otherwise how the first one ended ("rank 1 (pid 42) was killed by
  // signal 9"). Does not block.
  std::string exited();
  // Waits up to `grace` for every rank to exit, then kills the rest; true when all exited 0.
  bool wait(std::chrono::milliseconds grace);

 private:
  std::vector<pid_t> pids_;    // [world_size - 1]: rank r at r - 1; 0 once reaped
  std::vector<int> statuses_;  // waitpid status, once reaped
  std::string first_exit_;
};

}  // namespace sparkglm::dist
