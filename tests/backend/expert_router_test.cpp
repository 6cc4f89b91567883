// select_experts on hand-built scores: the tie rule, the bias's role, NaN, and the weights.
#include "engine/backend/cpu/expert_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

namespace sparkglm::cpu {
namespace {

ModelConfig router_config(int experts, int k) {
  ModelConfig c;
  c.n_routed_experts = experts;
  c.num_experts_per_tok = k;
  return c;
}

std::vector<ExpertChoice> select(const ModelConfig& c, const std::vector<float>& logits,
                                 const std::vector<float>& bias) {
  std::vector<ExpertChoice> out(size_t(c.num_experts_per_tok), ExpertChoice{-7, -7.0f});
  select_experts(c, logits.data(), bias.empty() ? nullptr : bias.data(), out.data());
  return out;
}

std::vector<int> experts_of(const std::vector<ExpertChoice>& ch) {
  std::vector<int> e;
  for (const auto& x : ch) e.push_back(x.expert);
  return e;
}

double sigmoid64(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

TEST(ExpertRouter, ExactTiesRankTheLowerIndexFirst) {
  const ModelConfig c = router_config(8, 3);
  // All equal: the first k indices, in index order.
  EXPECT_EQ(experts_of(select(c, std::vector<float>(8, 0.25f), {})), (std::vector<int>{0, 1, 2}));
  // Expert 6 wins outright; experts 1, 4 and 7 tie for the last two places.
  const std::vector<float> logits = {-1.0f, 0.5f, -2.0f, -1.0f, 0.5f, -3.0f, 2.0f, 0.5f};
  const auto ch = select(c, logits, {});
  EXPECT_EQ(experts_of(ch), (std::vector<int>{6, 1, 4}));
  // A tie made by the bias: experts 1 and 2 both reach 0.5 + 0.125 exactly.
  const ModelConfig c2 = router_config(4, 1);
  const std::vector<float> l2 = {0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> b2 = {0.0f, 0.125f, 0.125f, 0.0f};
  EXPECT_EQ(experts_of(select(c2, l2, b2)), (std::vector<int>{1}));
}

TEST(ExpertRouter, BiasChangesTheChoiceButNotTheWeights) {
  const ModelConfig c = router_config(6, 2);
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f, -2.0f, -3.0f};
  const auto plain = select(c, logits, {});
  EXPECT_EQ(experts_of(plain), (std::vector<int>{0, 1}));
  // A bias of +1 on expert 4 lifts s+bias to 1.12 > s_0 = 0.88: expert 4 takes rank 0.
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f};
  const auto biased = select(c, logits, bias);
  ASSERT_EQ(experts_of(biased), (std::vector<int>{4, 0}));
  // The weights use s, not s + bias.
  const double s4 = sigmoid64(-2.0), s0 = sigmoid64(2.0);
  const double w4 = s4 / (s4 + s0) * 2.5, w0 = s0 / (s4 + s0) * 2.5;
  const double w4_with_bias = (s4 + 1.0) / (s4 + 1.0 + s0) * 2.5;
  std::printf("biased weights %.9g %.9g, expected %.9g %.9g (with bias it would be %.9g)\n",
              biased[0].weight, biased[1].weight, w4, w0, w4_with_bias);
  // FP32 sigmoid, one sum, one division and one product: a few ulps of 2.5 (2^-22 each).
  const double tol = 4e-6;
  EXPECT_NEAR(biased[0].weight, w4, tol);
  EXPECT_NEAR(biased[1].weight, w0, tol);
  EXPECT_GT(std::abs(w4_with_bias - w4), 100 * tol);  // the check can tell the two apart
}

TEST(ExpertRouter, NanIsNeverChosen) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const ModelConfig c = router_config(6, 2);
  // A NaN logit and a NaN bias, each on the expert that would otherwise win.
  const std::vector<float> logits = {nan, 1.0f, 3.0f, 0.0f, 2.0f, -1.0f};
  const std::vector<float> bias = {0.0f, 0.0f, nan, 0.0f, 0.0f, 0.0f};
  const auto ch = select(c, logits, bias);
  EXPECT_EQ(experts_of(ch), (std::vector<int>{4, 1}));
  for (const auto& x : ch) EXPECT_FALSE(std::isnan(x.weight));
  // Fewer usable experts than k: the tail is empty and the one expert takes the whole scale.
  const std::vector<float> only_one = {nan, nan, nan, -4.0f, nan, nan};
  const auto one = select(c, only_one, {});
  EXPECT_EQ(experts_of(one), (std::vector<int>{3, -1}));
  EXPECT_FLOAT_EQ(one[0].weight, 2.5f);
  EXPECT_EQ(one[1].weight, 0.0f);
}

TEST(ExpertRouter, WeightsSumToTheScalingFactorInRankOrder) {
  const ModelConfig c = router_config(288, 8);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  double worst = 0.0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(288), bias(288);
    for (auto& v : logits) v = nd(rng);
    for (auto& v : bias) v = 0.05f * nd(rng);
    const auto ch = select(c, logits, bias);
    double sum = 0.0;
    float prev_key = std::numeric_limits<float>::infinity();
    int prev_e = -1;
    std::vector<bool> seen(288, false);
    for (const auto& x : ch) {
      ASSERT_GE(x.expert, 0);
      ASSERT_FALSE(seen[size_t(x.expert)]) << "expert chosen twice";
      seen[size_t(x.expert)] = true;
      const float key =
          1.0f / (1.0f + std::exp(-logits[size_t(x.expert)])) + bias[size_t(x.expert)];
      ASSERT_TRUE(key < prev_key || (key == prev_key && x.expert > prev_e)) << "not in rank order";
      prev_key = key;
      prev_e = x.expert;
      sum += x.weight;
    }
    // Every unchosen expert's key is <= the last chosen key (ties to a higher index).
    for (int e = 0; e < 288; ++e) {
      if (seen[size_t(e)]) continue;
      const float key = 1.0f / (1.0f + std::exp(-logits[size_t(e)])) + bias[size_t(e)];
      ASSERT_TRUE(key < prev_key || (key == prev_key && e > prev_e)) << "expert " << e;
    }
    worst = std::max(worst, std::abs(sum - 2.5));
  }
  std::printf("worst |sum of weights - 2.5| over 200 tokens: %.3g\n", worst);
  // 8 rounded quotients and products (each within 2^-24 relative) plus the FP32 sum: < 8 ulps.
  EXPECT_LT(worst, 8 * 2.5 * std::ldexp(1.0, -23));

  ModelConfig raw = c;  // without norm_topk_prob the weight is s * scale
  raw.norm_topk_prob = false;
  std::vector<float> logits(288, -5.0f);
  logits[10] = 1.5f;
  const auto ch = select(raw, logits, {});
  EXPECT_EQ(ch[0].expert, 10);
  EXPECT_NEAR(ch[0].weight, sigmoid64(1.5) * 2.5, 1e-6);
}

}  // namespace
}  // namespace sparkglm::cpu
