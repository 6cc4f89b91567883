// The verify rule (engine/runtime/speculation/draft_check.h): with temperature > 0 the committed
// token follows the target distribution whatever the draft, checked by chi-square against the exact
// probabilities on a small vocab; greedy rows commit sample()'s token.
#include "engine/runtime/speculation/draft_check.h"

#include <gtest/gtest.h>

#include <random>

namespace sparkglm {
namespace {

// Pearson's statistic of `counts` against probabilities w / sum w (cells with w = 0 must be 0).
double chi_square(const std::vector<int>& counts, const std::vector<float>& w, int n) {
  double total = 0.0, stat = 0.0;
  for (float x : w) total += double(x);
  for (size_t i = 0; i < w.size(); ++i) {
    const double expected = n * double(w[i]) / total;
    if (expected == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    stat += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return stat;
}

// Chi-square critical values at p = 0.001 by degrees of freedom (the draws are seeded, so a pass
// is reproducible; a wrong rule shifts a cell by thousands of draws and fails by far).
double critical(int df) {
  static const double kTable[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12};
  return kTable[df];
}

TEST(DraftCheckTest, TheRejectionRuleKeepsTheTargetDistributionForEveryDraft) {
  const std::vector<float> w = {0.2f, 0.5f, 0.1f, 0.6f, 0.0f, 0.4f, 0.2f};  // p = w / 2
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int n = 200000;
  for (int32_t draft = 0; draft < int32_t(w.size()); ++draft) {
    std::vector<int> counts(w.size(), 0);
    int accepted_count = 0;
    for (int i = 0; i < n; ++i) {
      bool accepted = false;
      const int32_t t = resolve_draft(w, draft, u(rng), u(rng), accepted);
      ++counts[size_t(t)];
      accepted_count += accepted;
      ASSERT_EQ(accepted, t == draft);
    }
    EXPECT_LT(chi_square(counts, w, n), critical(5)) << "draft " << draft;
    // The draft is accepted exactly with its target probability.
    EXPECT_NEAR(double(accepted_count) / n, double(w[size_t(draft)]) / 2.0, 0.005);
  }
}

TEST(DraftCheckTest, SpeculativeSamplingMatchesTheNonSpeculativeSampler) {
  // Temperature, top-k and a repetition penalty all shape the target; every seed is a request.
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 6;
  p.repetition_penalty = 1.3f;
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.9f, 2.2f};
  const std::vector<int> eos;
  const int n = 60000;
  std::vector<float> w;
  SequenceSampler(p, {1, 3}, 0).target_weights(logits.data(), 8, eos, w);
  EXPECT_EQ(w[4], 0.0f);  // outside the top 6
  EXPECT_EQ(w[2], 0.0f);
  for (int32_t draft : {1, 4, 7}) {  // likely, impossible, and middling drafts
    std::vector<int> spec(8, 0), plain(8, 0);
    for (int seed = 0; seed < n; ++seed) {
      p.seed = uint64_t(seed);
      const SequenceSampler s(p, {1, 3}, 0);
      ++spec[size_t(check_draft(s, logits.data(), 8, eos, draft).token.token)];
      ++plain[size_t(s.sample(logits.data(), 8, eos).token)];
    }
    EXPECT_LT(chi_square(spec, w, n), critical(5)) << "draft " << draft;
    EXPECT_LT(chi_square(plain, w, n), critical(5)) << "the sampler itself, draft " << draft;
  }
}

TEST(DraftCheckTest, UnderAGrammarMaskTheTargetIsTheMaskedDistribution) {
  // An output grammar's mask at the row (ids 1 and 7, the two likeliest, refused): committed
  // tokens follow the masked sampler's distribution, and a refused draft is never accepted.
  SamplingParams p;
  p.temperature = 0.9f;
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.9f, 2.2f};
  const uint32_t allowed = 0xffu & ~((1u << 1) | (1u << 7));
  const std::vector<int> eos;
  const int n = 60000;
  std::vector<float> w;
  SequenceSampler(p, {}, 0).target_weights(logits.data(), 8, eos, w, &allowed);
  EXPECT_EQ(w[1], 0.0f);
  EXPECT_EQ(w[7], 0.0f);
  for (int32_t draft : {1, 3, 7}) {  // refused, likely, refused
    std::vector<int> spec(8, 0), plain(8, 0);
    int accepted = 0;
    for (int seed = 0; seed < n; ++seed) {
      p.seed = uint64_t(seed);
      const SequenceSampler s(p, {}, 0);
      const DraftCheck c = check_draft(s, logits.data(), 8, eos, draft, &allowed);
      ++spec[size_t(c.token.token)];
      accepted += c.accepted;
      ++plain[size_t(s.sample(logits.data(), 8, eos, &allowed).token)];
    }
    EXPECT_LT(chi_square(spec, w, n), critical(5)) << "draft " << draft;
    EXPECT_LT(chi_square(plain, w, n), critical(5)) << "the sampler itself, draft " << draft;
    if (draft != 3) {
      EXPECT_EQ(accepted, 0) << "draft " << draft << " is refused by the mask";
    }
  }
  // Greedy: the masked argmax (id 3), never the refused maximum (id 1).
  p.temperature = 0.0f;
  const SequenceSampler g(p, {}, 0);
  for (int32_t draft : {1, 3}) {
    const DraftCheck c = check_draft(g, logits.data(), 8, eos, draft, &allowed);
    EXPECT_EQ(c.token.token, 3);
    EXPECT_EQ(c.accepted, draft == 3);
  }
}

TEST(DraftCheckTest, AGreedyRowCommitsTheSamplersTokenAndAcceptsOnlyIt) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  const SequenceSampler s(p, {}, 0);
  const std::vector<float> logits = {0.5f, 3.0f, 3.0f, -2.0f};
  const std::vector<int> eos;
  const SampledToken expected = s.sample(logits.data(), 4, eos);
  for (int32_t draft = -1; draft < 4; ++draft) {
    const DraftCheck c = check_draft(s, logits.data(), 4, eos, draft);
    EXPECT_EQ(c.token.token, expected.token);
    EXPECT_EQ(c.token.logprob, expected.logprob);
    EXPECT_EQ(c.accepted, draft == 1) << "draft " << draft;  // the first maximum, id 1
  }
}

}  // namespace
}  // namespace sparkglm
