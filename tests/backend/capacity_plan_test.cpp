// The memory plan of the full glm-5.3-flash against a hand computation from MODEL.md section 1's
// shapes and section 7's formats, for 1, 2 and 4 H200s and 2 and 4 GB10s.
#include "engine/backend/capacity_plan.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

// Stored bytes of an [n, k] projection in each format, and of FP32 / BF16 tensors.
int64_t mx(int64_t n, int64_t k) {
  return n * k + n * k / 32;
}
int64_t fp8b(int64_t n, int64_t k) {
  return n * k + 4 * ((n + 127) / 128) * ((k + 127) / 128);
}
int64_t nv(int64_t n, int64_t k) {
  return n * k / 2 + n * k / 16 + 4 + 4;
}
int64_t bf16(int64_t n, int64_t k) {
  return 2 * n * k;
}
int64_t f32(int64_t n) {
  return 4 * n;
}

// MODEL.md section 1.
constexpr int64_t D = 4096, V = 154880, kInter = 12288, kHk = 64 * 128, kE = 288, kW = 2048;

struct Bytes {
  int64_t sharded = 0, replicated = 0;
  int64_t total() const { return sharded + replicated; }
};

Bytes mla_layer() {  // attention of an MLA layer, indexer included
  Bytes b;
  b.replicated = fp8b(1536, D) + f32(1536) + fp8b(512, D) + f32(512) +         // q_a, kv_a
                 fp8b(32 * 128, 1536) + fp8b(128, D) + 2 * f32(128) +          // wq_b, wk, k_norm
                 bf16(32, D) + bf16(1, D) + f32(4);                            // weights, gate, ape
  b.sharded = fp8b(64 * 256, 1536) + fp8b(64 * 512, 512) + fp8b(D, 64 * 256);  // q_b, kv_b, o
  return b;
}

Bytes moe_mlp() {
  Bytes b;
  b.replicated = f32(kE * D) + f32(kE);  // router and its bias
  b.sharded = kE * (2 * nv(kW, D) + nv(D, kW)) + 2 * fp8b(kW, D) + fp8b(D, kW);
  return b;
}

Bytes fp4_local_model() {
  Bytes b;
  b.replicated = bf16(V, D) + f32(D) + f32(4 * 4 * D) + f32(4) + f32(1);  // embed, norm, hc head
  b.sharded = mx(V, D);                                                   // lm_head
  const int64_t per_layer = 2 * f32(D) + 2 * (f32(24 * 4 * D) + f32(24) + f32(3));  // norms, mHC
  b.replicated += 45 * per_layer;
  // 34 KDA layers: q, k, v, convs, f_b, A_log, dt_bias, b, g_b, o split by head; f_a, g_a, o_norm
  // not.
  b.sharded += 34 * (3 * mx(kHk, D) + 3 * f32(kHk * 4) + mx(kHk, 128) + f32(64) + f32(kHk) +
                     mx(64, D) + mx(kHk, 128) + mx(D, kHk));
  b.replicated += 34 * (2 * mx(128, D) + f32(128));
  const Bytes mla = mla_layer(), moe = moe_mlp();
  b.sharded += 11 * mla.sharded + 42 * moe.sharded + 3 * (2 * mx(kInter, D) + mx(D, kInter));
  b.replicated += 11 * mla.replicated + 42 * moe.replicated;
  // MTP (layer 45): enorm, hnorm, shared_head.norm, two layer norms, eh_proj, MLA and MoE.
  b.replicated += 5 * f32(D) + bf16(D, 2 * D) + mla.replicated + moe.replicated;
  b.sharded += mla.sharded + moe.sharded;
  return b;
}

// MODEL.md: 142,606,336 B of recurrent state a sequence, plus 3 taps of q, k, v history.
constexpr int64_t kKdaState = 142'606'336 + 34 * 3 * 3 * kHk * 4;
// fp8_g128 latent (528 B) + indexer key (128 + 4 B) + gate (4 B), 11 MLA layers + MTP, on one
// of n devices: the KV shard keeps every n-th position's latent, every key and gate.
constexpr int64_t kv_token(int64_t n) {
  return (528 / n + 132 + 4) * 12;
}

int64_t workspace(int64_t rows) {
  const int64_t per_row = 2 * 4 * D + 4 * D + 10 * kHk + 64 * (256 + 2 * 512 + 256) + 32 * 128 +
                          kE + 2 * 8 * kW + 2 * kW + 2 * kInter;
  return 4 * (rows * per_row + 256 * 64 * (2048 + 3) + 64 * V);
}

CapacityRequest request(const char* gpu, int n) {
  CapacityRequest r;
  r.device = device_kind(gpu);
  r.devices = n;
  return r;
}

TEST(CapacityPlan, WeightsStateAndKvTokenMatchMODELmdShapes) {
  const ModelConfig c = preset_config("glm-5.3-flash");
  const Bytes hand = fp4_local_model();
  for (int n : {1, 2, 4}) {
    const CapacityPlan p = plan_capacity(c, request("h200", n));
    EXPECT_EQ(p.model_bytes, hand.total());
    EXPECT_EQ(int64_t(p.demand.weights), hand.replicated + (hand.sharded + n - 1) / n) << n;
    EXPECT_EQ(int64_t(p.demand.state), 4 * ((kKdaState + n - 1) / n)) << n;
    EXPECT_EQ(int64_t(p.demand.workspace), workspace(8192));
    EXPECT_EQ(int64_t(p.demand.per_block), 16 * kv_token(n)) << n;
    EXPECT_DOUBLE_EQ(p.kv_shard_gain, double(kv_token(1)) / double(kv_token(n))) << n;
    EXPECT_EQ(p.demand.reserve, kCudaReserveBytes);
  }
  std::printf("fp4-local glm-5.3-flash: %.2f GiB (%.2f GiB split across devices)\n",
              double(hand.total()) / (1 << 30), double(hand.sharded) / (1 << 30));
}

// The KV pool: what 0.9 of the device leaves after the fixed parts, in whole 16-token blocks.
TEST(CapacityPlan, KvPoolInTokensFor2And4H200sAnd2And4Gb10s) {
  const ModelConfig c = preset_config("glm-5.3-flash");
  const Bytes hand = fp4_local_model();
  for (auto [gpu, n, memory] :
       {std::tuple{"h200", 2, 141'000'000'000LL}, std::tuple{"h200", 4, 141'000'000'000LL},
        std::tuple{"gb10", 2, 128'000'000'000LL}, std::tuple{"gb10", 4, 128'000'000'000LL}}) {
    const CapacityPlan p = plan_capacity(c, request(gpu, n));
    ASSERT_TRUE(p.fits) << gpu << " x" << n << ": " << p.why_not;
    const int64_t fixed = hand.replicated + (hand.sharded + n - 1) / n +
                          4 * ((kKdaState + n - 1) / n) + workspace(8192) +
                          int64_t(kCudaReserveBytes);
    const int64_t budget = int64_t(0.9 * double(memory)) - fixed;
    EXPECT_EQ(p.kv_tokens, budget / (16 * kv_token(n)) * 16) << gpu << " x" << n;
    std::printf("%d x %s: %lld KV tokens\n", n, gpu, static_cast<long long>(p.kv_tokens));
  }
}

// The KV shard multiplies the pool's tokens by 664 / 400 = 1.66 on two devices and 664 / 268 =
// 2.48 on four (in whole blocks); --kv-shard off keeps every latent on every device.
TEST(CapacityPlan, TheKvShardMultipliesThePoolsTokensByItsStatedGain) {
  const ModelConfig c = preset_config("glm-5.3-flash");
  for (const int n : {2, 4}) {
    CapacityRequest r = request("h200", n);
    const CapacityPlan shard = plan_capacity(c, r);
    r.kv_shard = false;
    const CapacityPlan whole = plan_capacity(c, r);
    ASSERT_TRUE(shard.fits && whole.fits);
    EXPECT_EQ(int64_t(whole.demand.per_block), 16 * kv_token(1));
    EXPECT_EQ(whole.kv_shard_gain, 1.0);
    EXPECT_EQ(shard.pool.kv_budget, whole.pool.kv_budget);
    const double gain = double(shard.kv_tokens) / double(whole.kv_tokens);
    EXPECT_NEAR(gain, shard.kv_shard_gain, 1e-3) << n;
    std::printf("%d x H200: %lld KV tokens with the KV shard, %lld without: %.3fx\n", n,
                static_cast<long long>(shard.kv_tokens), static_cast<long long>(whole.kv_tokens),
                gain);
  }
  CapacityRequest three = request("h200", 3);
  EXPECT_THROW(plan_capacity(c, three), Error);  // 3 does not divide a block of 16
  three.kv_shard = false;
  EXPECT_TRUE(plan_capacity(c, three).fits);
}

TEST(CapacityPlan, OneH200HoldsTheModelOnlyCutToTheDeepestFittingDepth) {
  ModelConfig c = preset_config("glm-5.3-flash");
  const CapacityRequest r = request("h200", 1);
  const CapacityPlan full = plan_capacity(c, r);
  EXPECT_FALSE(full.fits);
  EXPECT_NE(full.why_not.find("weights"), std::string::npos) << full.why_not;
  const int depth = deepest_fitting_depth(c, r);
  ASSERT_GE(depth, 4);
  c.set_depth(depth);
  EXPECT_TRUE(plan_capacity(c, r).fits);
  c.set_depth(depth + 4);
  EXPECT_FALSE(plan_capacity(c, r).fits);
  std::printf("one H200 holds %d of 45 layers in fp4-local\n", depth);
}

TEST(CapacityPlan, RefusesUnknownDevicesAndEmptyGroups) {
  EXPECT_THROW(device_kind("a100"), Error);
  CapacityRequest r = request("gb10", 0);
  EXPECT_THROW(plan_capacity(preset_config("glm-5.3-flash"), r), Error);
}

}  // namespace
}  // namespace sparkglm
