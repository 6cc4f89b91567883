#include "engine/backend/cpu/dsa_indexer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/model/engine_fault.h"

namespace sparkglm {
namespace {

using cpu::select_attended;

constexpr float kNaN = NAN;
constexpr float kInf = INFINITY;

std::vector<int32_t> range(int32_t lo, int32_t hi) {  // [lo, hi)
  std::vector<int32_t> v(size_t(hi - lo));
  std::iota(v.begin(), v.end(), lo);
  return v;
}

// The tokens of the given pools (kpool 4) followed by the tail positions.
std::vector<int32_t> tokens_of(std::vector<int32_t> pools, std::vector<int32_t> tail) {
  std::vector<int32_t> v;
  for (int32_t p : pools)
    for (int32_t i = 0; i < 4; ++i) v.push_back(4 * p + i);
  v.insert(v.end(), tail.begin(), tail.end());
  return v;
}

std::string show(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t e : v) s += std::to_string(e) + " ";
  return s;
}

TEST(DsaIndexer, SelectsEveryPositionWhileFewPools) {
  // topk 3 pools of 4: rows up to t = 14 see at most 3 complete pools. Their scores are ignored,
  // even NaN.
  for (int64_t t = 0; t <= 14; ++t) {
    const std::vector<float> scores(size_t((t + 1) / 4), kNaN);
    EXPECT_EQ(select_attended(scores, t, 4, 3), range(0, int32_t(t) + 1)) << "t = " << t;
  }
  // t = 15 completes a 4th pool: now one pool is dropped (the lowest score, pool 2).
  const std::vector<float> scores = {3, 2, 1, 4};
  EXPECT_EQ(select_attended(scores, 15, 4, 3), tokens_of({0, 1, 3}, {}));
  // Zero pools selectable keeps only the tail.
  EXPECT_EQ(select_attended(scores, 17, 4, 0), range(16, 18));
}

TEST(DsaIndexer, EqualScoresPickLowerPools) {
  EXPECT_EQ(select_attended(std::vector<float>{1, 3, 3, 2, 3, 3}, 23, 4, 3),
            tokens_of({1, 2, 4}, {}));
  EXPECT_EQ(select_attended(std::vector<float>{5, 5, 5, 5, 5}, 21, 4, 2),
            tokens_of({0, 1}, {20, 21}));
  EXPECT_EQ(select_attended(std::vector<float>{0, 7, 0, 7, 0, 0}, 23, 4, 3),
            tokens_of({0, 1, 3}, {}));
  // Signed zeros compare equal, so the lower pool wins there too.
  EXPECT_EQ(select_attended(std::vector<float>{1, -0.0f, 0.0f, -1, -1}, 19, 4, 2),
            tokens_of({0, 1}, {}));
  EXPECT_EQ(select_attended(std::vector<float>{1, 0.0f, -0.0f, -1, -1}, 19, 4, 2),
            tokens_of({0, 1}, {}));
}

// The negative control of engine/model/engine_fault.h: equal scores pick the higher pool first,
// while distinct scores select as before.
TEST(DsaIndexer, TheTieFlippedControlPicksHigherPoolsOnEqualScores) {
  constexpr EngineFault kFlip = EngineFault::kIndexerTieFlipped;
  EXPECT_EQ(select_attended(std::vector<float>{1, 3, 3, 2, 3, 3}, 23, 4, 3, kFlip),
            tokens_of({2, 4, 5}, {}));
  EXPECT_EQ(select_attended(std::vector<float>{5, 5, 5, 5, 5}, 21, 4, 2, kFlip),
            tokens_of({3, 4}, {20, 21}));
  EXPECT_EQ(select_attended(std::vector<float>{0, 7, 0, 7, 0, 0}, 23, 4, 3, kFlip),
            tokens_of({1, 3, 5}, {}));
  const std::vector<float> distinct = {0.5f, 3, -1, 2, 7, 0};
  EXPECT_EQ(select_attended(distinct, 23, 4, 3, kFlip), select_attended(distinct, 23, 4, 3));
  // Other faults leave the selection alone.
  EXPECT_EQ(
      select_attended(std::vector<float>{5, 5, 5, 5, 5}, 21, 4, 2, EngineFault::kMoeClampDropped),
      tokens_of({0, 1}, {20, 21}));
}

TEST(DsaIndexer, NanScoresAreNeverSelected) {
  EXPECT_EQ(select_attended(std::vector<float>{kNaN, 1, kNaN, kNaN, 0.5f, kNaN}, 23, 4, 3),
            tokens_of({1, 4}, {}));  // only 2 of 3 pools: the rest are NaN
  EXPECT_EQ(select_attended(std::vector<float>(5, kNaN), 22, 4, 2), range(20, 23));
  EXPECT_EQ(select_attended(std::vector<float>{kNaN, -1, -2, -3, -4}, 19, 4, 4),
            tokens_of({1, 2, 3, 4}, {}));
}

TEST(DsaIndexer, InfiniteScoresOrderLikeNumbers) {
  EXPECT_EQ(select_attended(std::vector<float>{-kInf, kInf, 0, -kInf, kNaN, 1}, 23, 4, 4),
            tokens_of({0, 1, 2, 5}, {}));
  EXPECT_EQ(select_attended(std::vector<float>{-kInf, -kInf, -kInf, kInf, kInf}, 19, 4, 3),
            tokens_of({0, 3, 4}, {}));
}

TEST(DsaIndexer, TailCoversPositionsAfterTheLastCompletePool) {
  // Pools ranked 4 > 1 > 0 > 2 > 3 > 5; topk 2 keeps pools 1 and 4 for every t here.
  const std::vector<float> scores = {3, 5, 2, 1, 9, 0};
  EXPECT_EQ(select_attended(scores, 19, 4, 2), tokens_of({1, 4}, {}));            // tail 0
  EXPECT_EQ(select_attended(scores, 20, 4, 2), tokens_of({1, 4}, {20}));          // tail 1
  EXPECT_EQ(select_attended(scores, 21, 4, 2), tokens_of({1, 4}, {20, 21}));      // tail 2
  EXPECT_EQ(select_attended(scores, 22, 4, 2), tokens_of({1, 4}, {20, 21, 22}));  // tail 3
  EXPECT_EQ(select_attended(scores, 23, 4, 2), tokens_of({1, 4}, {}));  // t ends pool 5: tail 0
  // When t closes a pool the tail is empty, so the query's own pool competes like any other and
  // t itself is not attended if that pool loses (MODEL.md: I_t is top pools plus the tail).
  EXPECT_EQ(select_attended(std::vector<float>{0, 5, 1}, 11, 4, 1), tokens_of({1}, {}));
  // Positions always ascend without repeats, and t is attended whenever the tail is not empty.
  for (int64_t t = 8; t < 24; ++t) {
    const auto v = select_attended(scores, t, 4, 1);
    EXPECT_TRUE(std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end())
        << show(v);
    if ((t + 1) % 4 != 0) {
      EXPECT_EQ(v.back(), t) << show(v);
    }
  }
}

TEST(DsaIndexer, MatchesBruteForceOnRandomTiedScores) {
  // Few distinct values (with NaN and infinities) make ties the common case.
  const float values[] = {kNaN, -kInf, -1, 0, 1, 2, kInf};
  std::mt19937 rng(1);
  for (int trial = 0; trial < 500; ++trial) {
    const int kpool = 1 + int(rng() % 5), topk = int(rng() % 9);
    const int64_t pools = 1 + int64_t(rng() % 60);
    const int64_t t = pools * kpool - 1 + int64_t(rng() % unsigned(kpool));
    std::vector<float> scores(static_cast<size_t>(pools));
    for (float& s : scores) s = values[rng() % 7];

    std::vector<int32_t> expect;
    if (pools <= topk) {
      expect = range(0, int32_t(t) + 1);
    } else {
      std::vector<int32_t> order;
      for (int32_t p = 0; p < pools; ++p)
        if (!std::isnan(scores[size_t(p)])) order.push_back(p);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return scores[size_t(a)] > scores[size_t(b)]; });
      order.resize(std::min(order.size(), size_t(topk)));
      std::sort(order.begin(), order.end());
      for (int32_t p : order)
        for (int i = 0; i < kpool; ++i) expect.push_back(p * kpool + i);
      for (int64_t j = pools * kpool; j <= t; ++j) expect.push_back(int32_t(j));
    }
    ASSERT_EQ(select_attended(scores, t, kpool, topk), expect)
        << "trial " << trial << " kpool " << kpool << " topk " << topk << " t " << t;
  }
}

TEST(DsaIndexer, PooledKeyIsTheGateSoftmaxAverage) {
  // gate + ape = log(1..4) gives weights 0.1, 0.2, 0.3, 0.4.
  const float k0[] = {1, 10, -1}, k1[] = {2, 20, -1}, k2[] = {3, 30, -1}, k3[] = {4, 40, -1};
  const float* keys[] = {k0, k1, k2, k3};
  const float gates[] = {0.5f, 0.5f, 0.5f, 0.5f};  // a shared gate cancels in the softmax
  const float ape[] = {std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  float out[3];
  cpu::pooled_index_key(keys, gates, ape, 4, 3, out);
  const double expect[] = {3.0, 30.0, -1.0};
  for (int e = 0; e < 3; ++e) {
    std::printf("K[%d] = %.9g (expect %g)\n", e, out[e], expect[e]);
    // exp and log round to ~1 ulp; 1e-5 relative is a hundredfold margin.
    EXPECT_NEAR(out[e], expect[e], 1e-5 * std::abs(expect[e]));
  }
  // A pool wider than the stack buffer: equal gates give the plain mean of 0..19, 9.5.
  std::vector<float> values(20), zeros(20, 0.0f);  // [20]: key i is the scalar i
  std::vector<const float*> wide(20);
  for (int i = 0; i < 20; ++i) wide[size_t(i)] = &(values[size_t(i)] = float(i));
  float mean = 0.0f;
  cpu::pooled_index_key(wide.data(), zeros.data(), zeros.data(), 20, 1, &mean);
  EXPECT_NEAR(mean, 9.5, 1e-5);
}

TEST(DsaIndexer, PoolScoreIsReluWeightedOverHeads) {
  ThreadPool pool(2);
  const float q[] = {1, 0, 0, 1};                              // [I=2, d_i=2]
  const float w[] = {2, 3};                                    // [I]
  const float keys[] = {1, 1, -1, 2, 3, -4, -1, -1, kNaN, 0};  // [5 pools, d_i]
  const auto scores = cpu::index_pool_scores(q, w, 2, 2, keys, 5, pool);
  // (2*relu(k0) + 3*relu(k1)) * rsqrt(2*2): all exact in FP32.
  const std::vector<float> expect = {2.5f, 3.0f, 3.0f, 0.0f};
  ASSERT_EQ(scores.size(), 5u);
  for (size_t p = 0; p < 4; ++p) EXPECT_EQ(scores[p], expect[p]) << "pool " << p;
  EXPECT_TRUE(std::isnan(scores[4])) << "a NaN key must give a NaN score, got " << scores[4];
}

}  // namespace
}  // namespace sparkglm
