#pragma once
// Bytes a forward step must read: the basis of the weight-streaming floor that decode speed is
// measured against (bytes / measured bandwidth = the fastest a memory-bound step can be).
#include <cstdint>

#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"

namespace sparkglm {

struct WeightFootprint {
  int64_t total_bytes = 0;          // every tensor of the checkpoint in its stored format
  int64_t decode_weight_bytes = 0;  // read by one decode token: dense weights, top-k + shared
                                    // experts, one embedding row, the LM head; no MTP
  int64_t kda_state_bytes =
      0;  // recurrent state + conv history one sequence reads (and writes) per token
  // The parts of decode_weight_bytes that scale differently with the rows of a step (no MTP):
  int64_t embedding_row_bytes = 0;      // one row of the embedding (one per row)
  int64_t routed_expert_bytes = 0;      // every routed expert of every MoE layer
  int64_t non_expert_decode_bytes = 0;  // the rest: read once whatever the rows
  // Parameters one token multiplies by (the tensors of decode_weight_bytes in elements, top-k of
  // the routed experts, the embedding row excluded: a lookup is not a product).
  int64_t active_params = 0;
};

// Bytes are those of `format` (checkpoint_format.h: a quantized tensor with its scales).
WeightFootprint weight_footprint(const ModelConfig& config,
                                 CheckpointFormat format = CheckpointFormat::kBf16);

}  // namespace sparkglm
