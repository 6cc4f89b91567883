// `sparkglm checkpoint quantize`: the fp4-local copy of a BF16 checkpoint has exactly the bytes
// `sparkglm tinyglm make --weight-format fp4-local` writes for the same weights, a training record
// is re-bound to the quantized shard, and a source it cannot quantize is refused naming why.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "tinyglm/checkpoint_quantizer.h"
#include "tinyglm/checkpoint_writer.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;

class CheckpointQuantizer : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("quantizer_test_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    const ModelConfig c = preset_config("tinyglm-micro");
    CheckpointWriteOptions o;
    o.seed = kDefaultDummySeed;
    write_dummy_checkpoint(c, dir("bf16"), o, pool_);
    o.format = CheckpointFormat::kFp4Local;
    write_dummy_checkpoint(c, dir("made-fp4"), o, pool_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string dir(const std::string& name) const { return (root_ / name).string(); }
  QuantizedCheckpoint quantize(const std::string& from, const std::string& to) {
    CheckpointWriteOptions o;
    o.format = CheckpointFormat::kFp4Local;
    return quantize_checkpoint(dir(from), dir(to), o, pool_);
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  fs::path root_;
  ThreadPool pool_{2};
};

TEST_F(CheckpointQuantizer, MakesTheBytesTheFp4LocalMakerWritesForTheSameWeights) {
  const QuantizedCheckpoint q = quantize("bf16", "quantized");
  EXPECT_EQ(q.shards, 1);
  const auto made = Checkpoint::open(dir("made-fp4"));
  const auto quantized = Checkpoint::open(dir("quantized"));
  ASSERT_EQ(made->names(), quantized->names());
  for (const std::string& name : made->names()) {
    const TensorView a = *made->find(name), b = *quantized->find(name);
    ASSERT_EQ(a.dtype, b.dtype) << name;
    ASSERT_EQ(a.shape, b.shape) << name;
    ASSERT_EQ(0, std::memcmp(a.data, b.data, a.nbytes)) << name;
  }
  EXPECT_EQ(nlohmann::json::parse(read(root_ / "made-fp4" / "config.json")),
            nlohmann::json::parse(read(root_ / "quantized" / "config.json")));
  EXPECT_EQ(read(root_ / "bf16" / "tokenizer.json"), read(root_ / "quantized" / "tokenizer.json"));
  EXPECT_EQ(q.weights_identity, "fp4-local:" + Checkpoint::open(dir("bf16"))->identity());
  EXPECT_FALSE(fs::exists(root_ / "quantized" / "training.json"));  // the source has none
}

TEST_F(CheckpointQuantizer, RebindsATrainingRecordToTheQuantizedShard) {
  fs::copy(root_ / "bf16", root_ / "trained");
  const std::string trained_sha(64, 'a');
  std::ofstream(root_ / "trained" / "training.json") << nlohmann::json{
      {"shard_sha256", trained_sha},
      {"weights_identity", "trained:seed=1"},
      {"steps", 7}}.dump();
  quantize("trained", "quantized");
  const auto t = nlohmann::json::parse(read(root_ / "quantized" / "training.json"));
  const std::string identity = Checkpoint::open(dir("quantized"))->identity();
  EXPECT_EQ(t["shard_sha256"], identity.substr(identity.find('=') + 1));
  EXPECT_EQ(t["derived_from"]["shard_sha256"], trained_sha);
  EXPECT_EQ(t["derived_from"]["weights_identity"], "trained:seed=1");
  EXPECT_EQ(t["steps"], 7);  // the rest of the record is the source's
}

TEST_F(CheckpointQuantizer, RefusesAnAlreadyQuantizedSourceNamingATensor) {
  try {
    quantize("made-fp4", "twice");
    FAIL() << "an fp4-local source was quantized again";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint);
    EXPECT_NE(std::string(e.what()).find("already quantized"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tensor '"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(root_ / "twice"));
}

TEST_F(CheckpointQuantizer, RefusesAMissingTensorAndWritingOverItsSourceOrAFolderHoldingIt) {
  // A config one layer deeper than the shards: its last layer's tensors are missing.
  fs::copy(root_ / "bf16", root_ / "short");
  auto config = nlohmann::json::parse(read(root_ / "short" / "config.json"));
  config["num_hidden_layers"] = config["num_hidden_layers"].get<int>() + 1;
  config["layer_types"].push_back(config["layer_types"].back());
  std::ofstream(root_ / "short" / "config.json") << config.dump();
  EXPECT_THROW(
      {
        try {
          quantize("short", "out");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("is missing"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(quantize("bf16", "bf16"), Error);
  CheckpointWriteOptions force;
  force.format = CheckpointFormat::kFp4Local;
  force.overwrite = true;  // --out a folder holding --model, with --force: still refused
  EXPECT_THROW(quantize_checkpoint(dir("bf16"), root_.string(), force, pool_), Error);
  EXPECT_TRUE(fs::exists(root_ / "bf16" / "model.safetensors.index.json"));
}

}  // namespace
}  // namespace sparkglm
