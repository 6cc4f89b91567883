#include "engine/model/model_loader.h"

#include <filesystem>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {

std::unique_ptr<LoadedModel> load_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error(ErrorKind::kIo, "--model " + dir + ": not a directory");
  auto m = std::make_unique<LoadedModel>();
  m->config = ModelConfig::load((fs::path(dir) / "config.json").string());
  m->weights = ModelWeights::bind(m->config, Checkpoint::open(dir));
  m->name = fs::path(dir).filename().string();
  if (m->name.empty()) m->name = fs::path(dir).parent_path().filename().string();
  return m;
}

ModelConfig preset_config_at_depth(const std::string& preset, int num_layers) {
  ModelConfig c = preset_config(preset);
  if (num_layers > 0) c.set_depth(num_layers);
  return c;
}

std::unique_ptr<LoadedModel> load_model_preset(const std::string& preset, int num_layers,
                                               uint64_t seed, ThreadPool& pool) {
  auto m = std::make_unique<LoadedModel>();
  m->config = preset_config_at_depth(preset, num_layers);
  m->weights = ModelWeights::bind(m->config, make_dummy_weights(m->config, seed, pool));
  m->name = preset;
  return m;
}

}  // namespace sparkglm
