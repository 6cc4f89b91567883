#include "engine/model/step_footprint.h"

#include <gtest/gtest.h>

#include "engine/model/weight_footprint.h"

namespace sparkglm {
namespace {

// One SwiGLU expert at production width: gate, up and down, 2048 x 4096 BF16 each.
constexpr int64_t kExpertBytes = 3 * int64_t(2048) * 4096 * 2;  // 50,331,648
constexpr int64_t kLatentBf16 = 512 * 2, kIndexBf16 = 128 * 2;  // a pooled indexer key
constexpr int64_t kLatentFp8 = 528;                             // MODEL.md section 1
// Sum of 1..n.
constexpr int64_t tri(int64_t n) {
  return n * (n + 1) / 2;
}

TEST(StepFootprint, TinyglmDecodeReadsTopKExpertsForOneRowAndAllSixteenFromTwoRows) {
  const ModelConfig c = preset_config("tinyglm");
  const WeightFootprint w = weight_footprint(c);
  // 3 MoE layers (layer 0 dense) x 16 routed experts.
  EXPECT_EQ(w.routed_expert_bytes, 3 * 16 * kExpertBytes);
  EXPECT_EQ(w.embedding_row_bytes, 4096 * 2);
  const DecodeStepBytes one = decode_step_bytes(c, 1, 127, KvDtype::kBF16);
  EXPECT_EQ(one.weights, w.non_expert_decode_bytes + 8192 + 3 * 8 * kExpertBytes);
  EXPECT_EQ(one.weights, w.decode_weight_bytes);  // the per-token footprint, for one row
  // 2 rows x top-8 already cover the 16 experts; more rows add only embedding rows.
  const DecodeStepBytes two = decode_step_bytes(c, 2, 127, KvDtype::kBF16);
  const DecodeStepBytes eight = decode_step_bytes(c, 8, 127, KvDtype::kBF16);
  EXPECT_EQ(two.weights, w.non_expert_decode_bytes + 2 * 8192 + 3 * 16 * kExpertBytes);
  EXPECT_EQ(eight.weights - two.weights, 6 * 8192);
  // 3 KDA layers: 64 x 128 x 128 state + 3 taps of q, k, v (3 x 8192), FP32, read and written.
  const int64_t state = 3 * (64 * 128 * 128 + 3 * 3 * 8192) * 4;
  EXPECT_EQ(w.kda_state_bytes, state);
  EXPECT_EQ(one.kda_state, 2 * state);
  EXPECT_EQ(eight.kda_state, 8 * 2 * state);
  // 128 visible tokens: 32 pools, all selected, so no indexer key is read.
  EXPECT_EQ(one.latent, 128 * kLatentBf16);
  EXPECT_EQ(eight.latent, 8 * 128 * kLatentBf16);
  EXPECT_EQ(one.total(), one.weights + one.kda_state + one.latent);
}

TEST(StepFootprint, LongContextReadsTheSelectedLatentsAndEveryPooledKey) {
  const ModelConfig c = preset_config("tinyglm");
  // 8192 visible: 2048 pools > 512, so 2048 + 3 latents and the 2048 pooled keys are read.
  EXPECT_EQ(decode_step_bytes(c, 1, 8191, KvDtype::kBF16).latent,
            2051 * kLatentBf16 + 2048 * kIndexBf16);
  // A million visible: 262,144 pooled keys, still 2051 latents.
  EXPECT_EQ(decode_step_bytes(c, 1, 1048575, KvDtype::kBF16).latent,
            2051 * kLatentBf16 + 262144 * kIndexBf16);
  // 2051 visible: 512 pools, still all selected.
  EXPECT_EQ(decode_step_bytes(c, 1, 2050, KvDtype::kBF16).latent, 2051 * kLatentBf16);
}

TEST(StepFootprint, FlashDecodeMatchesTheDocumentedStateAndCacheSizes) {
  const ModelConfig c = preset_config("glm-5.3-flash");
  const WeightFootprint w = weight_footprint(c);
  // 45 layers: 34 KDA with 142,606,336 B of state (MODEL.md) plus conv history 34 x 9 x 8192 x 4.
  EXPECT_EQ(w.kda_state_bytes, 142606336 + 34 * 9 * 8192 * 4);
  // 42 MoE layers x 288 experts.
  EXPECT_EQ(w.routed_expert_bytes, 42 * 288 * kExpertBytes);
  const DecodeStepBytes one = decode_step_bytes(c, 1, 127, KvDtype::kFp8G128);
  EXPECT_EQ(one.weights, w.non_expert_decode_bytes + 8192 + 42 * 8 * kExpertBytes);
  EXPECT_EQ(one.latent, 11 * 128 * kLatentFp8);
  // 36 rows x 8 = 288: every expert; 64 rows cannot read more.
  EXPECT_EQ(decode_step_bytes(c, 36, 127, KvDtype::kFp8G128).weights,
            w.non_expert_decode_bytes + 36 * 8192 + w.routed_expert_bytes);
  EXPECT_EQ(decode_step_bytes(c, 64, 127, KvDtype::kFp8G128).weights,
            w.non_expert_decode_bytes + 64 * 8192 + w.routed_expert_bytes);
  // About 17 B parameters per token (MODEL.md), 16.7 B without the embedding row.
  EXPECT_GT(w.active_params, int64_t(16'500'000'000));
  EXPECT_LT(w.active_params, int64_t(18'000'000'000));
}

// fp4-local: an NVFP4 expert is 0.5 B a weight + 1 B per 16 + two FP32 scalars a projection.
TEST(StepFootprint, FlashFp4LocalDecodeReadsNvfp4ExpertsAtTheirStoredSize) {
  const ModelConfig c = preset_config("glm-5.3-flash");
  const WeightFootprint w = weight_footprint(c, CheckpointFormat::kFp4Local);
  const WeightFootprint bf16 = weight_footprint(c);
  constexpr int64_t kNvfp4Expert = 3 * (2048 * 4096 / 2 + 2048 * 4096 / 16 + 8);  // 14,155,800
  EXPECT_EQ(w.routed_expert_bytes, 42 * 288 * kNvfp4Expert);
  EXPECT_EQ(w.embedding_row_bytes, 4096 * 2);  // the embedding stays BF16
  const DecodeStepBytes one =
      decode_step_bytes(c, 1, 127, KvDtype::kFp8G128, CheckpointFormat::kFp4Local);
  EXPECT_EQ(one.weights, w.non_expert_decode_bytes + 8192 + 42 * 8 * kNvfp4Expert);
  EXPECT_EQ(one.weights, w.decode_weight_bytes);
  // The LM head alone goes from 2 B to 1 + 1/32 B a weight.
  EXPECT_GT(bf16.non_expert_decode_bytes - w.non_expert_decode_bytes,
            int64_t(154880) * 4096 - int64_t(154880) * 4096 / 32);
  EXPECT_EQ(w.active_params, bf16.active_params);  // the same products, fewer bytes
  EXPECT_EQ(w.kda_state_bytes, bf16.kda_state_bytes);
}

TEST(StepFootprint, PrefillFlopsOfShortPromptAreProjectionsPlusCausalAttention) {
  const ModelConfig c = preset_config("tinyglm");
  const WeightFootprint w = weight_footprint(c);
  const PrefillFlops f = prefill_flops(c, 4);
  const int64_t head = 320 * 4096;  // byte vocabulary x hidden
  EXPECT_EQ(f.projections, 2 * (w.active_params - head) * 4 + 2 * head);
  // One MLA layer, 64 heads, rank 512: 4 x 64 x 512 per attended token; 1 + 2 + 3 + 4 attended.
  EXPECT_EQ(f.mla, 4 * 64 * 512 * tri(4));
  // 3 KDA layers x 64 heads per token: 6 x 128 x 128 + 2 x 64 x (3 x 128 + 2 x 128).
  EXPECT_EQ(f.kda, 3 * 4 * 64 * (6 * 128 * 128 + 2 * 64 * 5 * 128));
  EXPECT_EQ(f.total(), f.projections + f.mla + f.kda);
}

TEST(StepFootprint, PrefillAttentionStopsGrowingAtTheIndexerSelection) {
  const ModelConfig c = preset_config("glm-5.3-flash");
  const int64_t n = 3000;
  // Queries 0..2050 attend t + 1 tokens, the rest 2051; the indexer scores floor((t+1)/4) pools
  // once that exceeds 512 (t + 1 >= 2052): pools 513..749 four times each, then 750 once.
  const int64_t attended = tri(2051) + (n - 2051) * 2051;
  const int64_t pools = 4 * (tri(749) - tri(512)) + 750;
  EXPECT_EQ(prefill_flops(c, n).mla, 11 * (4 * 64 * 512 * attended + 2 * 32 * 128 * pools));
}

}  // namespace
}  // namespace sparkglm
