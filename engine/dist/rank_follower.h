#pragma once
// A rank other than 0: replays rank 0's runner calls (rank_leader.h) on its own shard until rank
// 0 says stop. It serves no HTTP and schedules nothing; the calls' results stay here (rank 0
// returns them), except what the collectives share.
#include "engine/dist/communicator.h"
#include "engine/model/model_runner.h"

namespace sparkglm::dist {

// Returns the number of calls replayed once rank 0 sends stop. Anything that fails (rank 0 gone:
// Error(kDeviceFatal); a step that fails here) is thrown: the caller exits non-zero, which closes
// this rank's connection so that rank 0 stops too instead of waiting in a collective.
int64_t follow_rank0(ModelRunner& runner, Communicator& comm);

}  // namespace sparkglm::dist
