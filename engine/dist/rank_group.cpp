#include "engine/dist/rank_group.h"

#include <chrono>

#include "engine/core/error.h"
#include "engine/dist/rank_bootstrap.h"

namespace sparkglm::dist {

namespace {

// Ranks that were told to stop exit at once; this only bounds a rank stuck in its own teardown.
constexpr std::chrono::milliseconds kStopGrace{10000};

}  // namespace

RankGroup::RankGroup(const RankSettings& s, const std::vector<std::string>& args,
                     const nlohmann::json& fingerprint) {
  RankAddress address{s.world_size, s.rank, s.master_addr, s.master_port};
  if (!s.launch && s.master_port == 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--master-port 0: ranks started one by one must name rank 0's port");
  int listen_fd = -1;
  if (s.launch) {
    listen_fd = listen_for_ranks(s.master_addr, s.master_port);
    address.master_port = listening_port(listen_fd);
    children_ = std::make_unique<RankProcesses>(args, s.world_size, address.master_port);
  }
  comm_ = join_ranks(address, fingerprint, listen_fd);
}

std::string RankGroup::lost() {
  if (children_)
    if (std::string why = children_->exited(); !why.empty()) return why;
  if (comm_->peer_lost())
    return rank() == 0 ? "a rank's connection closed" : "rank 0's connection closed";
  return "";
}

bool RankGroup::wait_for_ranks() {
  return !children_ || children_->wait(kStopGrace);
}

}  // namespace sparkglm::dist
