#pragma once
// Where a model comes from: a checkpoint directory (--model DIR) or a preset with deterministic
// dummy weights (--preset NAME). Both routes end in the same ModelWeights::bind.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/thread_pool.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace sparkglm {

struct LoadedModel {
  ModelConfig config;
  ModelWeights weights;
  std::string name;  // the model id: the preset name, or the directory's name
};

// config.json + shards through the safetensors loader.
std::unique_ptr<LoadedModel> load_model_dir(const std::string& dir);
// The model id of a checkpoint directory: its name (of the parent for a trailing slash).
std::string model_dir_name(const std::string& dir);
// A preset's config, its depth cut to num_layers (keeping the layer pattern) when > 0.
ModelConfig preset_config_at_depth(const std::string& preset, int num_layers);
// A preset's config (depth cut to num_layers when > 0) with dummy weights of `seed`, stored in
// `format` as `sparkglm tinyglm make --weight-format` would write them (tinyglm/stored_weights.h)
// and bound as a checkpoint directory of that format would be (quantized ones dequantized).
std::unique_ptr<LoadedModel> load_model_preset(const std::string& preset, int num_layers,
                                               uint64_t seed, ThreadPool& pool,
                                               CheckpointFormat format = CheckpointFormat::kBf16);

}  // namespace sparkglm
