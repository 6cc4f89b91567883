#include "engine/runtime/speculation/speculative_rollback.h"

#include "engine/core/error.h"

namespace sparkglm {

const char* speculative_rollback_name(SpeculativeRollback r) {
  return r == SpeculativeRollback::kRecords ? "records" : "recompute";
}

SpeculativeRollback speculative_rollback_from_name(const std::string& name,
                                                   const std::string& flag) {
  if (name == "records") return SpeculativeRollback::kRecords;
  if (name == "recompute") return SpeculativeRollback::kRecompute;
  throw Error(ErrorKind::kInvalidArgument,
              flag + ": expected records or recompute, got '" + name + "'");
}

int speculative_state_records(int k, SpeculativeRollback r) {
  if (k <= 0) return 0;
  return r == SpeculativeRollback::kRecords ? k + 1 : 1;
}

int speculative_slice_rows(int k, SpeculativeRollback r) {
  if (k <= 0) return 1;
  return r == SpeculativeRollback::kRecords ? k + 1 : 2 * k + 1;
}

}  // namespace sparkglm
