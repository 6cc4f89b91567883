#include "tinyglm/dummy_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/model/tensor_layout.h"
#include "tinyglm/dummy_hash.h"

namespace sparkglm {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Golden values computed once, independently, with numpy (float32 arithmetic, same formula as
// tinyglm/dummy_hash.h). A change here changes every dummy checkpoint: bump the seed instead.
TEST(DummyWeights, ValueFunctionMatchesIndependentlyComputedGoldenBits) {
  const uint64_t key = dummy::tensor_key(0x5eed0001, "model.layers.0.self_attn.q_proj.weight");
  const float half = std::sqrt(3.0f / 256.0f);
  EXPECT_EQ(bits(half), 0x3dddb3d7u);
  EXPECT_EQ(bits(dummy::value(key, 0, 0.0f, half)), 0xbdd60cfcu);
  EXPECT_EQ(bits(dummy::value(key, 1, 0.0f, half)), 0xbcb3551eu);
  EXPECT_EQ(bits(dummy::value(key, 12345, 0.0f, half)), 0x3d247fc5u);
  const uint64_t scale_key = dummy::tensor_key(0x5eed0001, "model.hc_head_scale");
  EXPECT_EQ(bits(dummy::value(scale_key, 0, 0.5f, 0.25f)), 0x3ec6555du);
}

TEST(DummyWeights, SameSeedGivesIdenticalBytesAndOtherSeedsDiffer) {
  const ModelConfig c = preset_config("tinyglm-micro");
  ThreadPool one(1), two(2);
  const auto a = make_dummy_weights(c, 7, one);
  const auto b = make_dummy_weights(c, 7, two);
  const auto other = make_dummy_weights(c, 8, two);
  ASSERT_EQ(a->names(), b->names());
  size_t differing = 0;
  for (const auto& name : a->names()) {
    const TensorView x = *a->find(name), y = *b->find(name), z = *other->find(name);
    ASSERT_EQ(x.nbytes, y.nbytes);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << name;
    differing += std::memcmp(x.data, z.data, x.nbytes) != 0;
  }
  // Norm weights are all ones whatever the seed; every random tensor must change.
  EXPECT_GT(differing, a->names().size() / 2);
  EXPECT_EQ(a->identity(), "dummy:seed=7");
}

TEST(DummyWeights, ScalesFollowTheInitRules) {
  const ModelConfig c = preset_config("tinyglm-micro");
  ThreadPool pool(2);
  const auto w = make_dummy_weights(c, kDefaultDummySeed, pool);
  for (const TensorSpec& spec : checkpoint_tensors(c)) {
    const TensorView v = *w->find(spec.name);
    ASSERT_EQ(v.shape, spec.shape) << spec.name;
    ASSERT_EQ(v.dtype, spec.dtype) << spec.name;
    double sum = 0, sum_sq = 0, lo = 1e30, hi = -1e30;
    const int64_t n = v.numel();
    for (int64_t i = 0; i < n; ++i) {
      const double x = v.dtype == DType::kBF16
                           ? bf16_to_f32(reinterpret_cast<const uint16_t*>(v.data)[i])
                           : reinterpret_cast<const float*>(v.data)[i];
      sum += x;
      sum_sq += x * x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    const double mean = sum / double(n), var = sum_sq / double(n) - mean * mean;
    const double half = spec.init.half_width;
    // Within the interval (BF16 rounding may step one ulp past it).
    EXPECT_GE(lo, spec.init.center - half * 1.01 - 1e-6) << spec.name;
    EXPECT_LE(hi, spec.init.center + half * 1.01 + 1e-6) << spec.name;
    if (n >= 4096 && half > 0) {
      // Uniform on [c - h, c + h]: variance h^2 / 3; with >= 4096 samples the estimate is within
      // 10%.
      EXPECT_NEAR(var, half * half / 3.0, 0.1 * half * half / 3.0) << spec.name;
      EXPECT_NEAR(mean, spec.init.center, 0.05 * half + 1e-6) << spec.name;
    }
    if (half == 0) {
      EXPECT_EQ(var, 0.0) << spec.name;
    }
  }
}

}  // namespace
}  // namespace sparkglm
