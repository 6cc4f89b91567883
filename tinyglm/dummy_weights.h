#pragma once
// Deterministic dummy weights for any config: every tensor of checkpoint_tensors(config) filled by
// the counter-based function of tinyglm/dummy_hash.h with its DummyInit rule, stored in the
// tensor's dtype (BF16 rounded to nearest even).
#include <cstdint>
#include <memory>

#include "engine/core/thread_pool.h"
#include "engine/model/config.h"
#include "engine/model/tensor_source.h"

namespace sparkglm {

constexpr uint64_t kDefaultDummySeed = 0x5eed0001;

std::shared_ptr<OwnedTensors> make_dummy_weights(const ModelConfig& config, uint64_t seed,
                                                 ThreadPool& pool);

// The identity string a dummy-weight source reports: "dummy:seed=<seed>".
std::string dummy_identity(uint64_t seed);

}  // namespace sparkglm
