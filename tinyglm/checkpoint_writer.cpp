#include "tinyglm/checkpoint_writer.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/model/safetensors.h"
#include "engine/text/byte_tokenizer.h"
#include "tinyglm/dummy_tokenizer.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {

namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(ErrorKind::kIo, "failed writing " + path.string());
}

// config.json as Hugging Face tooling reads it: the engine's fields, plus those whose defaults in
// transformers' Glm5NextTextConfig would contradict them (num_key_value_heads 64 against
// num_attention_heads, three dense MLP layers against first_k_dense_replace, a pad id outside a
// small vocabulary). The engine's parser ignores these keys; a test loads the result with
// transformers.AutoConfig and AutoTokenizer (tests/python/test_hf_checkpoint_load.py).
nlohmann::json hf_config_json(const ModelConfig& config, CheckpointFormat format) {
  nlohmann::json j = config.to_json();
  if (format == CheckpointFormat::kFp4Local)
    j["quantization_config"] = fp4_local_quantization_config(config);
  j["num_key_value_heads"] = config.num_attention_heads;  // MLA: one latent serves every head
  nlohmann::json mlp = nlohmann::json::array();
  for (int i = 0; i < config.num_hidden_layers; ++i)
    mlp.push_back(i < config.first_k_dense_replace ? "dense" : "sparse");
  j["mlp_layer_types"] = mlp;
  j["pad_token_id"] = nullptr;  // the byte vocabulary has no pad token
  return j;
}

std::string shard_name(int index, int count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", index, count);
  return buf;
}

}  // namespace

int write_checkpoint(const ModelConfig& config, const StoredWeights& stored,
                     const std::string& weights_identity, const TokenizerFiles& tokenizer,
                     const std::string& dir, const CheckpointWriteOptions& options) {
  const fs::path target(dir);
  if (fs::exists(target) && !fs::is_empty(target) && !options.overwrite)
    throw Error(ErrorKind::kInvalidArgument,
                dir + " exists and is not empty; choose another --out or pass --force");
  const fs::path staging = target.string() + ".partial";
  fs::remove_all(staging);
  fs::create_directories(staging);

  // Group tensors (in checkpoint order) into shards of at most max_shard_bytes.
  std::vector<std::vector<std::pair<std::string, TensorView>>> shards(1);
  int64_t shard_bytes = 0, total_bytes = 0;
  for (const std::string& name : stored.order) {
    const TensorView view = *stored.tensors->find(name);
    if (shard_bytes > 0 && shard_bytes + int64_t(view.nbytes) > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace_back(name, view);
    shard_bytes += int64_t(view.nbytes);
    total_bytes += int64_t(view.nbytes);
  }

  nlohmann::json weight_map = nlohmann::json::object();
  const int count = int(shards.size());
  const std::map<std::string, std::string> metadata{{"format", "pt"},
                                                    {"sparkglm_weights", weights_identity}};
  for (int i = 0; i < count; ++i) {
    const std::string name = shard_name(i + 1, count);
    write_safetensors((staging / name).string(), shards[size_t(i)], metadata);
    for (const auto& [tensor, _] : shards[size_t(i)]) weight_map[tensor] = name;
  }
  const nlohmann::json index{{"metadata", {{"total_size", total_bytes}}},
                             {"weight_map", weight_map}};
  write_text(staging / "model.safetensors.index.json", index.dump(2) + "\n");
  write_text(staging / "config.json", hf_config_json(config, options.format).dump(2) + "\n");
  if (!tokenizer.tokenizer_json.empty())
    write_text(staging / "tokenizer.json", tokenizer.tokenizer_json);
  if (!tokenizer.tokenizer_config_json.empty())
    write_text(staging / "tokenizer_config.json", tokenizer.tokenizer_config_json);

  if (fs::exists(target)) fs::remove_all(target);
  fs::rename(staging, target);
  return count;
}

int write_dummy_checkpoint(const ModelConfig& config, const std::string& dir,
                           const CheckpointWriteOptions& options, ThreadPool& pool) {
  config.validate();
  const fs::path target(dir);
  if (fs::exists(target) && !fs::is_empty(target) && !options.overwrite)  // before the weights
    throw Error(ErrorKind::kInvalidArgument,
                dir + " exists and is not empty; choose another --out or pass --force");
  const StoredWeights stored =
      stored_weights(config, make_dummy_weights(config, options.seed, pool), options.format, pool);
  // The byte vocabulary where the model has it; otherwise a BPE vocabulary of the model's size, so
  // that every id the model can sample decodes to text.
  const bool bytes = config.vocab_size == ByteTokenizer::kVocabSize;
  const TokenizerFiles tokenizer{
      bytes ? ByteTokenizer::hf_tokenizer_json() : dummy_tokenizer_json(config),
      bytes ? ByteTokenizer::hf_tokenizer_config_json() : dummy_tokenizer_config_json(config)};
  return write_checkpoint(config, stored, dummy_identity(options.seed), tokenizer, dir, options);
}

}  // namespace sparkglm
