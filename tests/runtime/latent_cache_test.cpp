#include "engine/runtime/latent_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/core/error.h"
#include "engine/model/engine_fault.h"

namespace sparkglm {
namespace {

std::vector<float> random_vector(int n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(LatentCache, ProductionFp8LatentTakes528BytesPerTokenPerLayer) {
  EXPECT_EQ(kv_vector_bytes(KvDtype::kFp8G128, 512), 528u);  // MODEL.md section 1
  EXPECT_EQ(kv_vector_bytes(KvDtype::kBF16, 512), 1024u);
  const ModelConfig c = preset_config("glm-5.3-flash");
  // 12 MLA layers (11 + MTP), per token: latent 528 + indexer key 132 + gate 4.
  EXPECT_EQ(LatentCache::bytes_per_block(c, 16, KvDtype::kFp8G128),
            size_t(12 * 16 * (528 + 132 + 4)));
  EXPECT_EQ(
      LatentCache::blocks_for_budget(c, 16, KvDtype::kFp8G128, size_t(12 * 16 * 664) * 10 + 5), 10);
}

TEST(LatentCache, StoredValuesComeBackWithinEachDtypesRounding) {
  const ModelConfig c = preset_config("tinyglm");  // latent 512 = 4 groups of 128
  std::mt19937 rng(3);
  const std::vector<int32_t> table = {2, 0};
  for (KvDtype t : {KvDtype::kF32, KvDtype::kBF16, KvDtype::kFp8G128}) {
    LatentCache cache(c, 3, 16, t);
    const auto v = random_vector(c.kv_lora_rank, rng, 1.0f);
    const auto k = random_vector(c.index_head_dim, rng, 3.0f);
    cache.store_latent(0, table, 17, v.data());
    cache.store_index_key(1, table, 5, k.data());
    std::vector<float> v2(v.size()), k2(k.size());
    cache.load_latent(0, table, 17, v2.data());
    cache.load_index_key(1, table, 5, k2.data());
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t g = i / 128 * 128;
      float amax = 0;
      for (size_t j = g; j < std::min(v.size(), g + 128); ++j)
        amax = std::max(amax, std::fabs(v[j]));
      // f32 exact; bf16 half an ulp (2^-8 relative); E4M3 half an ulp of 3 mantissa bits
      // (2^-4 relative) above its subnormal range, whose step is 2^-9 of the group scale.
      const double bound = t == KvDtype::kF32 ? 0.0
                           : t == KvDtype::kBF16
                               ? std::fabs(v[i]) * 0x1p-8
                               : std::fabs(v[i]) * 0x1p-4 + amax / 448.0 * 0x1p-10;
      EXPECT_LE(std::fabs(v2[i] - v[i]), bound) << to_string(t) << " element " << i;
    }
    double worst = 0;
    for (size_t i = 0; i < k.size(); ++i) worst = std::max(worst, std::fabs(double(k2[i]) - k[i]));
    EXPECT_LE(worst, t == KvDtype::kF32 ? 0.0 : 1.0) << to_string(t);
  }
}

TEST(LatentCache, Fp8GroupScaleIsAmaxOver448AndAllZerosStayZero) {
  const ModelConfig c = preset_config("tinyglm-micro");  // latent 64: one partial group
  LatentCache cache(c, 1, 16, KvDtype::kFp8G128);
  std::vector<float> v(static_cast<size_t>(c.kv_lora_rank), 0.0f), out(v.size(), 1.0f);
  cache.store_latent(0, {0}, 0, v.data());
  cache.load_latent(0, {0}, 0, out.data());
  for (float x : out) EXPECT_EQ(x, 0.0f);
  v[3] = -896.0f;  // amax 896: scale 2, so -896 is exactly -448 * 2
  v[4] = 1.0f;
  cache.store_latent(0, {0}, 1, v.data());
  cache.load_latent(0, {0}, 1, out.data());
  EXPECT_EQ(out[3], -896.0f);
  EXPECT_EQ(out[4], 1.0f);
}

// The negative control of engine/model/engine_fault.h: fp8_g128 scales stored one exponent too
// high, so latents and indexer keys read back exactly doubled; f32 and bf16 ignore it.
TEST(LatentCache, TheFp8ScaleControlReadsEveryFp8ValueBackDoubled) {
  const ModelConfig c = preset_config("tinyglm");  // latent 512 = 4 groups of 128
  std::mt19937 rng(5);
  const std::vector<float> v = random_vector(c.kv_lora_rank, rng, 1.0f);
  const std::vector<float> k = random_vector(c.index_head_dim, rng, 3.0f);
  for (KvDtype t : {KvDtype::kF32, KvDtype::kBF16, KvDtype::kFp8G128}) {
    LatentCache intact(c, 1, 16, t);
    LatentCache broken(c, 1, 16, t, EngineFault::kFp8ScaleOffByOneExponent);
    std::vector<float> vi(v.size()), vb(v.size()), ki(k.size()), kb(k.size());
    for (LatentCache* cache : {&intact, &broken}) {
      cache->store_latent(0, {0}, 5, v.data());
      cache->store_index_key(0, {0}, 5, k.data());
    }
    intact.load_latent(0, {0}, 5, vi.data());
    broken.load_latent(0, {0}, 5, vb.data());
    intact.load_index_key(0, {0}, 5, ki.data());
    broken.load_index_key(0, {0}, 5, kb.data());
    const float factor = t == KvDtype::kFp8G128 ? 2.0f : 1.0f;
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(vb[i], factor * vi[i]) << to_string(t) << " " << i;
    for (size_t i = 0; i < k.size(); ++i)
      ASSERT_EQ(kb[i], factor * ki[i]) << to_string(t) << " " << i;
  }
}

TEST(LatentCache, UnknownDtypeNameIsRejected) {
  EXPECT_EQ(kv_dtype_from_string("fp8_g128"), KvDtype::kFp8G128);
  EXPECT_THROW(kv_dtype_from_string("fp8"), Error);
}

}  // namespace
}  // namespace sparkglm
