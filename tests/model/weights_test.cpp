// Binding a checkpoint to a config: the promised errors for missing, unknown, misshapen and
// mistyped tensors, and the two routes to tinyGLM weights (in memory, and through a checkpoint
// directory) giving identical weights.
#include "engine/model/weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>

#include <unistd.h>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_loader.h"
#include "engine/model/tensor_layout.h"
#include "tinyglm/checkpoint_writer.h"
#include "tinyglm/dummy_weights.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;

// A copy of `src` with one tensor dropped, replaced or added.
std::shared_ptr<OwnedTensors> edited(const TensorSource& src, const std::string& drop,
                                     const std::string& add = "", DType add_type = DType::kF32,
                                     std::vector<int64_t> add_shape = {}) {
  auto out = std::make_shared<OwnedTensors>("edited");
  for (const auto& name : src.names()) {
    if (name == drop) continue;
    const TensorView v = *src.find(name);
    std::memcpy(out->add(name, v.dtype, v.shape), v.data, v.nbytes);
  }
  if (!add.empty()) out->add(add, add_type, add_shape);
  return out;
}

std::string bind_error(const ModelConfig& c, std::shared_ptr<const TensorSource> src) {
  try {
    ModelWeights::bind(c, std::move(src));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidCheckpoint);
    return e.what();
  }
  return "(no error)";
}

class WeightsBinding : public ::testing::Test {
 protected:
  ModelConfig config = preset_config("tinyglm-micro");
  ThreadPool pool{2};
  std::shared_ptr<OwnedTensors> good = make_dummy_weights(config, 3, pool);
};

TEST_F(WeightsBinding, BindsEveryTensorOfTheLayout) {
  const ModelWeights w = ModelWeights::bind(config, good);
  EXPECT_EQ(w.layers.size(), 4u);
  EXPECT_TRUE(w.layers[0].dense_mlp);
  EXPECT_EQ(w.layers[1].moe.experts.size(), 8u);
  ASSERT_TRUE(w.mtp.has_value());
  EXPECT_EQ(w.identity, "dummy:seed=3");
}

TEST_F(WeightsBinding, MissingTensorIsNamedWithItsExpectedShape) {
  const std::string name = "model.layers.3.self_attn.indexer.wk.weight";
  const std::string e = bind_error(config, edited(*good, name));
  EXPECT_NE(e.find(name), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  EXPECT_NE(e.find("[32, 256]"), std::string::npos) << e;
}

TEST_F(WeightsBinding, UnknownTensorIsNamed) {
  const std::string e =
      bind_error(config, edited(*good, "", "model.layers.9.mystery.weight", DType::kF32, {2}));
  EXPECT_NE(e.find("model.layers.9.mystery.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown"), std::string::npos) << e;
}

TEST_F(WeightsBinding, ShapeMismatchNamesBothShapes) {
  const std::string name = "model.layers.1.self_attn.q_proj.weight";
  const std::string e = bind_error(config, edited(*good, name, name, DType::kBF16, {64, 256}));
  EXPECT_NE(e.find(name), std::string::npos) << e;
  EXPECT_NE(e.find("shape [64, 256]"), std::string::npos) << e;
  EXPECT_NE(e.find("expected [128, 256]"), std::string::npos) << e;
}

TEST_F(WeightsBinding, DtypeThatCannotServeARoleIsAnError) {
  const std::string name = "model.norm.weight";
  const std::string e = bind_error(config, edited(*good, name, name, DType::kI32, {256}));
  EXPECT_NE(e.find(name), std::string::npos) << e;
  EXPECT_NE(e.find("I32"), std::string::npos) << e;
}

TEST_F(WeightsBinding, ACheckpointForAnotherConfigIsRejected) {
  ModelConfig other = config;
  other.n_routed_experts = 4;
  other.num_experts_per_tok = 2;
  const std::string e = bind_error(other, good);
  EXPECT_NE(e.find("mlp.gate"), std::string::npos) << e;
}

// Tensors packed back to back by another writer may start at odd addresses.
class UnalignedCopy : public TensorSource {
 public:
  explicit UnalignedCopy(const TensorSource& src) : src_(src) {
    size_t total = 0;
    for (const auto& name : src.names()) total += src.find(name)->nbytes + 1;
    bytes_.resize(total + 1);
    size_t at = 1;  // odd from the start
    for (const auto& name : src.names()) {
      TensorView v = *src.find(name);
      std::memcpy(&bytes_[at], v.data, v.nbytes);
      v.data = &bytes_[at];
      views_[name] = v;
      at += v.nbytes + (v.nbytes % 2 == 0 ? 1 : 0);  // keep every tensor misaligned
    }
  }
  std::optional<TensorView> find(const std::string& name) const override {
    auto it = views_.find(name);
    return it == views_.end() ? std::nullopt : std::optional<TensorView>(it->second);
  }
  std::vector<std::string> names() const override { return src_.names(); }
  std::string identity() const override { return "unaligned"; }

 private:
  const TensorSource& src_;
  std::vector<std::byte> bytes_;
  std::map<std::string, TensorView> views_;
};

TEST_F(WeightsBinding, UnalignedTensorsAreConvertedNotReadInPlace) {
  const ModelWeights aligned = ModelWeights::bind(config, good);
  const ModelWeights copied = ModelWeights::bind(config, std::make_shared<UnalignedCopy>(*good));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copied.final_norm) % alignof(float), 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copied.lm_head.data) % alignof(float), 0u);
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(copied.lm_head.at(3, i), aligned.lm_head.at(3, i));
  EXPECT_EQ(copied.final_norm[5], aligned.final_norm[5]);
}

TEST(TinyglmCheckpoint, DirectoryRouteGivesTheSameWeightsAndLogitsAsTheInMemoryRoute) {
  const fs::path dir = fs::temp_directory_path() / ("sparkglm-ckpt-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const ModelConfig config = preset_config("tinyglm-micro");
  ThreadPool pool(2);
  CheckpointWriteOptions opt;
  opt.seed = 11;
  opt.max_shard_bytes = 1 << 20;  // several shards, so the index is exercised
  const int shards = write_dummy_checkpoint(config, dir.string(), opt, pool);
  EXPECT_GT(shards, 1);
  EXPECT_THROW(write_dummy_checkpoint(config, dir.string(), opt, pool), Error);  // never clobbers

  const auto memory = make_dummy_weights(config, 11, pool);
  const auto disk = Checkpoint::open(dir.string());
  ASSERT_EQ(disk->names(), memory->names());
  for (const auto& name : memory->names()) {
    const TensorView a = *memory->find(name), b = *disk->find(name);
    ASSERT_EQ(a.dtype, b.dtype) << name;
    ASSERT_EQ(a.shape, b.shape) << name;
    ASSERT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << name;
  }
  const auto loaded = load_model_dir(dir.string());
  EXPECT_EQ(loaded->config.to_json(), config.to_json());
  EXPECT_NO_THROW(ModelWeights::bind(config, disk));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sparkglm
