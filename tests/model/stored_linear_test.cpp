// ModelWeights::bind with Quantized::kKeep (the CUDA loader's binding): each quantized projection
// is described as stored, pointing at its source bytes and scales, never dequantized.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/core/thread_pool.h"
#include "engine/model/checkpoint_format.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "tinyglm/dummy_weights.h"
#include "tinyglm/stored_weights.h"

namespace sparkglm {
namespace {

std::shared_ptr<const TensorSource> micro_fp4_local(const ModelConfig& c) {
  ThreadPool& pool = default_thread_pool();
  return stored_weights(c, make_dummy_weights(c, kDefaultDummySeed, pool),
                        CheckpointFormat::kFp4Local, pool)
      .tensors;
}

const void* bytes_of(const TensorSource& s, const std::string& name) {
  return s.find(name)->data;
}

TEST(StoredLinear, KeepDescribesEachFormatWithoutConverting) {
  const ModelConfig c = preset_config("tinyglm-micro");
  const auto src = micro_fp4_local(c);
  const ModelWeights w = ModelWeights::bind(c, src, ModelWeights::Quantized::kKeep);
  EXPECT_TRUE(w.owned.empty());  // nothing dequantized

  const std::string q = "model.layers.0.self_attn.q_proj.";
  const Linear& mx = w.layers[0].kda.q_proj;
  EXPECT_EQ(mx.format, LinearFormat::kMxfp8);
  EXPECT_EQ(mx.dtype, DType::kF8E4M3);
  EXPECT_EQ(mx.data, bytes_of(*src, q + "weight"));
  EXPECT_EQ(static_cast<const void*>(mx.scale), bytes_of(*src, q + "weight_scale"));

  const int mla = c.num_hidden_layers - 1;  // tinyglm: KDA, KDA, KDA, DSA
  ASSERT_EQ(c.layer_kind(mla), LayerKind::kSparseAttention);
  const std::string qa = "model.layers." + std::to_string(mla) + ".self_attn.q_a_proj.";
  const Linear& fp8 = w.layers[size_t(mla)].mla.q_a;
  EXPECT_EQ(fp8.format, LinearFormat::kFp8Block);
  EXPECT_EQ(static_cast<const void*>(fp8.scale_inv), bytes_of(*src, qa + "weight_scale_inv"));

  const std::string ex = "model.layers.1.mlp.experts.2.down_proj.";
  const Linear& nv = w.layers[1].moe.experts[2].down;
  EXPECT_EQ(nv.format, LinearFormat::kNvfp4);
  EXPECT_EQ(nv.dtype, DType::kU8);
  EXPECT_EQ(nv.rows, c.hidden_size);
  EXPECT_EQ(nv.cols, c.moe_intermediate_size);
  float scale_2;
  std::memcpy(&scale_2, bytes_of(*src, ex + "weight_scale_2"), sizeof(scale_2));
  EXPECT_EQ(nv.global_scale, scale_2);
  EXPECT_GT(scale_2, 0.0f);

  // The embedding (BF16 in fp4-local) stays dense; the CPU binding still dequantizes.
  EXPECT_FALSE(w.embed.quantized());
  const ModelWeights cpu = ModelWeights::bind(c, src);
  EXPECT_EQ(cpu.layers[0].kda.q_proj.format, LinearFormat::kDense);
  EXPECT_EQ(cpu.layers[0].kda.q_proj.dtype, DType::kF32);
}

}  // namespace
}  // namespace sparkglm
