#pragma once
// `sparkglm tinyglm make`: writes a complete checkpoint directory from dummy weights (config.json,
// safetensors shards with their index, tokenizer files) that the engine then loads through the
// ordinary loader.
#include <cstdint>
#include <string>

#include "engine/core/thread_pool.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"

namespace sparkglm {

struct CheckpointWriteOptions {
  uint64_t seed = 0;
  int64_t max_shard_bytes = int64_t(2)
                            << 30;  // a new shard starts when the next tensor would pass this
  bool overwrite = false;           // replace an existing non-empty directory
  CheckpointFormat format = CheckpointFormat::kBf16;  // fp4-local: tinyglm/stored_weights.h
};

// Writes into a temporary sibling directory and renames it into place, so a failure never leaves a
// half-written checkpoint at `dir`. Returns the number of shards written.
int write_dummy_checkpoint(const ModelConfig& config, const std::string& dir,
                           const CheckpointWriteOptions& options, ThreadPool& pool);

}  // namespace sparkglm
