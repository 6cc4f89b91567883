#pragma once
// Bytes a forward step must read: the basis of the weight-streaming floor that decode speed is
// measured against (bytes / measured bandwidth = the fastest a memory-bound step can be).
#include <cstdint>

#include "engine/model/config.h"

namespace sparkglm {

struct WeightFootprint {
  int64_t total_bytes = 0;          // every tensor of the checkpoint as tinyglm stores it
  int64_t decode_weight_bytes = 0;  // read by one decode token: dense weights, top-k + shared
                                    // experts, one embedding row, the LM head; no MTP
  int64_t kda_state_bytes =
      0;  // recurrent state + conv history one sequence reads (and writes) per token
};

WeightFootprint weight_footprint(const ModelConfig& config);

}  // namespace sparkglm
