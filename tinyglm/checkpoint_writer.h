#pragma once
// Checkpoint directories the engine loads through the ordinary loader (config.json, safetensors
// shards with their index, tokenizer files): `sparkglm tinyglm make` writes one from dummy weights,
// `sparkglm checkpoint quantize` (checkpoint_quantizer.h) one from another checkpoint's tensors.
#include <cstdint>
#include <string>

#include "engine/core/thread_pool.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"
#include "tinyglm/stored_weights.h"

namespace sparkglm {

struct CheckpointWriteOptions {
  uint64_t seed = 0;
  int64_t max_shard_bytes = int64_t(2)
                            << 30;  // a new shard starts when the next tensor would pass this
  bool overwrite = false;           // replace an existing non-empty directory
  CheckpointFormat format = CheckpointFormat::kBf16;  // fp4-local: tinyglm/stored_weights.h
};

// The tokenizer files written beside the shards (an empty one is not written: a checkpoint of the
// byte vocabulary may have none, and the loader then uses the byte tokenizer).
struct TokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
};

// Writes `stored` (shards of at most options.max_shard_bytes, in stored.order) with its index,
// config.json (with the fp4-local quantization_config when options.format is fp4-local) and
// `tokenizer`; the shards' metadata names `weights_identity`. Into a temporary sibling directory
// renamed into place, as below. Returns the number of shards written.
int write_checkpoint(const ModelConfig& config, const StoredWeights& stored,
                     const std::string& weights_identity, const TokenizerFiles& tokenizer,
                     const std::string& dir, const CheckpointWriteOptions& options);

// Writes into a temporary sibling directory and renames it into place, so a failure never leaves a
// half-written checkpoint at `dir`. Returns the number of shards written.
int write_dummy_checkpoint(const ModelConfig& config, const std::string& dir,
                           const CheckpointWriteOptions& options, ThreadPool& pool);

}  // namespace sparkglm
