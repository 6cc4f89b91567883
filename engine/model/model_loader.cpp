#include "engine/model/model_loader.h"

#include <filesystem>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "tinyglm/dummy_weights.h"
#include "tinyglm/stored_weights.h"

namespace sparkglm {

std::unique_ptr<LoadedModel> load_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error(ErrorKind::kIo, "--model " + dir + ": not a directory");
  auto m = std::make_unique<LoadedModel>();
  m->config = ModelConfig::load((fs::path(dir) / "config.json").string());
  m->weights = ModelWeights::bind(m->config, Checkpoint::open(dir));
  m->name = model_dir_name(dir);
  return m;
}

std::string model_dir_name(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string name = fs::path(dir).filename().string();
  return name.empty() ? fs::path(dir).parent_path().filename().string() : name;
}

ModelConfig preset_config_at_depth(const std::string& preset, int num_layers) {
  ModelConfig c = preset_config(preset);
  if (num_layers > 0) c.set_depth(num_layers);
  return c;
}

std::unique_ptr<LoadedModel> load_model_preset(const std::string& preset, int num_layers,
                                               uint64_t seed, ThreadPool& pool,
                                               CheckpointFormat format) {
  auto m = std::make_unique<LoadedModel>();
  m->config = preset_config_at_depth(preset, num_layers);
  m->weights = ModelWeights::bind(
      m->config,
      stored_weights(m->config, make_dummy_weights(m->config, seed, pool), format, pool).tensors);
  // Other values than the BF16 dummies: another identity (prefix caches key on it), the one
  // DeviceWeights::generate gives the same weights.
  if (format != CheckpointFormat::kBf16)
    m->weights.identity += std::string(",format=") + checkpoint_format_name(format);
  m->name = preset;
  return m;
}

}  // namespace sparkglm
