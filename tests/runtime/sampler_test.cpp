#include "engine/runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

const std::vector<int> kNoEos;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Chi-square critical values at p = 0.001 by degrees of freedom: the draws use fixed seeds, so a
// pass is deterministic, and a wrong distribution overshoots these by orders of magnitude.
double chi_square_bound(size_t dof) {
  const double table[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
  return table[dof];
}

std::vector<float> random_logits(int64_t vocab, uint32_t seed, float scale = 3.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(vocab));
  for (float& v : x) v = dist(gen);
  return x;
}

// softmax(x / t) in double; -inf entries get 0.
std::vector<double> softmax(const std::vector<float>& x, double t = 1.0) {
  double m = -kInf;
  for (float v : x) m = std::max(m, double(v));
  std::vector<double> p(x.size());
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += p[i] = std::exp((double(x[i]) - m) / t);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<double> log_softmax(const std::vector<float>& x) {
  std::vector<double> p = softmax(x);
  for (double& v : p) v = std::log(v);
  return p;
}

int32_t reference_argmax(const std::vector<float>& x) {
  int32_t best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[size_t(best)]) best = int32_t(i);
  return best;
}

int32_t first_token(const SamplingParams& p, const std::vector<float>& x, uint64_t seed) {
  SequenceSampler s(p, {}, seed);
  return s.sample(x.data(), int64_t(x.size()), kNoEos).token;
}

// Counts of the first token of `n` requests with seeds 0..n-1 (the scheduler's fallback seeds).
std::vector<int> first_token_counts(const SamplingParams& p, const std::vector<float>& x, int n) {
  std::vector<int> counts(x.size());
  for (int s = 0; s < n; ++s) ++counts[size_t(first_token(p, x, uint64_t(s)))];
  return counts;
}

// Chi-square of `counts` against `p` over the tokens with p > 0; tokens with p == 0 must not occur.
double chi_square(const std::vector<int>& counts, const std::vector<double>& p) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double c2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 but was drawn";
      continue;
    }
    const double e = n * p[i];
    c2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return c2;
}

// Every logprob of a vocab of at most 20, read back through top_logprobs.
std::vector<double> all_logprobs(const SequenceSampler& s, const std::vector<float>& x,
                                 const std::vector<int>& eos = kNoEos) {
  std::vector<double> lp(x.size(), -kInf);
  for (auto [id, v] : s.sample(x.data(), int64_t(x.size()), eos).top_logprobs) lp[size_t(id)] = v;
  return lp;
}

SamplingParams greedy_with_logprobs() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.top_logprobs = 20;
  return p;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "token " << i;
}

TEST(Sampler, GreedyIsArgmaxWithTiesToTheLowerId) {
  SamplingParams p;
  p.temperature = 0.0f;
  for (uint32_t trial = 0; trial < 20; ++trial) {
    std::vector<float> x = random_logits(5000, trial);
    EXPECT_EQ(first_token(p, x, trial), reference_argmax(x)) << "trial " << trial;
  }
  std::vector<float> x = random_logits(5000, 99);
  const float top = x[size_t(reference_argmax(x))] + 1.0f;
  x[4321] = top;
  x[1234] = top;
  x[3000] = top;
  x[7] = kNaN;
  EXPECT_EQ(first_token(p, x, 1), 1234);
  EXPECT_EQ(first_token(p, x, 2), 1234);  // no randomness in greedy
}

TEST(Sampler, NaNLogitsAreNeverSampled) {
  const std::vector<float> x = {kNaN, 0.0f, kNaN, 0.0f, kNaN, 0.0f};
  SamplingParams p;
  const std::vector<int> counts = first_token_counts(p, x, 3000);
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  EXPECT_LT(chi_square(counts, {0, 1.0 / 3, 0, 1.0 / 3, 0, 1.0 / 3}), chi_square_bound(2));
  p.temperature = 0.0f;
  EXPECT_EQ(first_token(p, {kNaN, -1.0f, kNaN}, 0), 1);
}

// Generates `steps` tokens with per-step logits that do not depend on the tokens chosen.
std::vector<int32_t> generate(const SamplingParams& p, uint64_t fallback_seed, int steps,
                              SequenceSampler* interleaved = nullptr) {
  SequenceSampler s(p, {1, 2, 3}, fallback_seed);
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) {
    const std::vector<float> x = random_logits(1000, uint32_t(i), 0.5f);
    if (interleaved) interleaved->sample(x.data(), 1000, kNoEos);  // another request in the batch
    out.push_back(s.sample(x.data(), 1000, kNoEos).token);
    s.accept(out.back());
  }
  return out;
}

int positions_that_differ(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

TEST(Sampler, SeededRequestIsReproducibleWhateverIsBatchedWithIt) {
  SamplingParams p;
  p.top_k = 200;
  p.top_p = 0.9f;
  p.seed = 42;
  const std::vector<int32_t> alone = generate(p, 1, 64);
  SamplingParams other_params;
  other_params.temperature = 1.7f;
  SequenceSampler other(other_params, {}, 5);
  EXPECT_EQ(generate(p, 2, 64, &other), alone);  // another fallback seed, another neighbour
  p.seed = 43;
  const std::vector<int32_t> reseeded = generate(p, 1, 64);
  EXPECT_GT(positions_that_differ(alone, reseeded), 48) << "seeds 42 and 43 drew alike";
}

TEST(Sampler, UnseededRequestUsesItsFallbackSeed) {
  SamplingParams p;
  EXPECT_EQ(generate(p, 7, 64), generate(p, 7, 64));
  EXPECT_GT(positions_that_differ(generate(p, 7, 64), generate(p, 8, 64)), 48);
  EXPECT_EQ(SequenceSampler(p, {}, 7).seed(), 7u);
  p.seed = 3;
  EXPECT_EQ(SequenceSampler(p, {}, 7).seed(), 3u);
}

TEST(Sampler, SampleIsPureUntilAcceptAdvancesTheDraw) {
  SamplingParams p;
  SequenceSampler s(p, {}, 11);
  const std::vector<float> x(50, 0.0f);
  std::set<int32_t> seen;
  for (int i = 0; i < 20; ++i) {
    const int32_t a = s.sample(x.data(), 50, kNoEos).token;
    EXPECT_EQ(s.sample(x.data(), 50, kNoEos).token, a) << "step " << i;
    EXPECT_EQ(s.generated(), i);
    seen.insert(a);
    s.accept(a);
  }
  EXPECT_GT(seen.size(), 10u);  // 20 draws from 50 equal tokens
}

TEST(Sampler, UniformIsACounterFunctionOfSeedAndIndex) {
  double sum = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const double u = sampling_uniform(9, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);  // the standard error is 0.0009
  EXPECT_EQ(sampling_uniform(9, 17), sampling_uniform(9, 17));
  EXPECT_NE(sampling_uniform(9, 17), sampling_uniform(10, 17));
  EXPECT_NE(sampling_uniform(9, 17), sampling_uniform(9, 18));
}

TEST(Sampler, ExpOfNonPositiveArgumentsIsAccurateAndUnderflowsToZero) {
  double worst = 0;
  for (double z = -87.0; z <= 0.0; z += 1e-3) {
    const float zf = float(z);
    const double want = std::exp(double(zf));
    worst = std::max(worst, std::fabs(double(exp_nonpositive(zf)) - want) / want);
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-87.5f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-kInf), 0.0f);
}

TEST(Sampler, DrawsMatchSoftmaxAtTemperatureOneAndHalf) {
  const std::vector<float> x = {1.0f, 0.5f, 2.0f, -1.0f, 0.0f, 1.5f, -0.5f, 0.8f};
  SamplingParams p;
  const double c1 = chi_square(first_token_counts(p, x, 20000), softmax(x));
  EXPECT_LT(c1, chi_square_bound(7));
  p.temperature = 0.5f;
  const double c2 = chi_square(first_token_counts(p, x, 20000), softmax(x, 0.5));
  EXPECT_LT(c2, chi_square_bound(7));

  // One request's successive draws (the counter stream) follow softmax too.
  p.temperature = 1.0f;
  SequenceSampler s(p, {}, 12345);
  std::vector<int> counts(x.size());
  for (int i = 0; i < 20000; ++i) {
    const int32_t t = s.sample(x.data(), 8, kNoEos).token;
    ++counts[size_t(t)];
    s.accept(t);
  }
  EXPECT_LT(chi_square(counts, softmax(x)), chi_square_bound(7));
}

TEST(Sampler, TopKOfOneIsGreedy) {
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  for (uint32_t s = 0; s < 200; ++s) {
    const std::vector<float> x = random_logits(500, s, 0.3f);
    ASSERT_EQ(first_token(p, x, s), reference_argmax(x)) << "seed " << s;
  }
}

TEST(Sampler, TopKKeepsTheKMostProbableRenormalised) {
  const std::vector<float> x = {0.1f, 1.2f, -0.3f, 0.9f, 0.0f, 1.0f, 0.2f, -1.0f, 0.5f, 0.4f};
  SamplingParams p;
  p.top_k = 3;  // keeps ids 1, 5, 3
  std::vector<double> want(x.size(), 0.0);
  const double z = std::exp(1.2) + std::exp(1.0) + std::exp(0.9);
  want[1] = std::exp(1.2) / z;
  want[5] = std::exp(1.0) / z;
  want[3] = std::exp(0.9) / z;
  EXPECT_LT(chi_square(first_token_counts(p, x, 12000), want), chi_square_bound(2));
}

TEST(Sampler, TopKTiesGoToTheLowerIds) {
  SamplingParams p;
  p.top_k = 2;
  const std::vector<int> counts = first_token_counts(p, std::vector<float>(10, 0.0f), 2000);
  EXPECT_LT(chi_square(counts, {0.5, 0.5, 0, 0, 0, 0, 0, 0, 0, 0}), chi_square_bound(1));
}

TEST(Sampler, SmallTopPKeepsOnlyTheTopToken) {
  SamplingParams p;
  p.top_p = 1e-4f;
  p.temperature = 2.0f;
  for (uint32_t s = 0; s < 200; ++s) {
    const std::vector<float> x = random_logits(1000, s, 0.3f);
    ASSERT_EQ(first_token(p, x, s), reference_argmax(x)) << "seed " << s;
  }
}

TEST(Sampler, TopPKeepsTheSmallestMostProbableSetReachingP) {
  // Probabilities 0.3, 0.2, 0.5 by id: the most probable is the last id.
  const std::vector<float> x = {std::log(0.3f), std::log(0.2f), std::log(0.5f)};
  SamplingParams p;
  p.top_p = 0.79f;  // 0.5 < 0.79 <= 0.5 + 0.3
  EXPECT_LT(chi_square(first_token_counts(p, x, 8000), {0.3 / 0.8, 0, 0.5 / 0.8}),
            chi_square_bound(1));
  p.top_p = 0.81f;  // needs all three
  EXPECT_LT(chi_square(first_token_counts(p, x, 8000), {0.3, 0.2, 0.5}), chi_square_bound(2));
}

TEST(Sampler, TopPIsMeasuredWithinTheTopKSetAndMinPComesLast) {
  const std::vector<float> x = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p;
  p.top_k = 2;      // renormalised: 0.571, 0.429
  p.top_p = 0.55f;  // 0.571 reaches it alone (0.4 of the whole vocab would not)
  EXPECT_LT(chi_square(first_token_counts(p, x, 4000), {1, 0, 0, 0}), chi_square_bound(1));
  p.top_k = 0;
  p.top_p = 0.75f;  // 0.4 + 0.3 < 0.75 <= 0.9: keeps three
  p.min_p = 0.3f;   // drops p < 0.12, i.e. only token 3 (min_p first would leave two)
  EXPECT_LT(chi_square(first_token_counts(p, x, 9000), {0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0}),
            chi_square_bound(2));
}

TEST(Sampler, TopPOnTheFullVocabKeepsExactlyTheSortedNucleus) {
  const int64_t vocab = 154880;
  // 100 head tokens at scattered ids with slowly falling logits, over a flat tail of noise.
  std::vector<float> x = random_logits(vocab, 5, 0.1f);
  std::vector<int32_t> head;
  for (int j = 0; j < 100; ++j) {
    head.push_back(int32_t((int64_t(j) * 1543 + 77) % vocab));
    x[size_t(head.back())] = 12.0f - 0.02f * float(j);
  }
  SamplingParams p;
  p.top_p = 0.5f;
  // Reference: sort every probability in double and take the prefix that reaches top_p.
  const std::vector<double> prob = softmax(x);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return prob[size_t(a)] > prob[size_t(b)] || (prob[size_t(a)] == prob[size_t(b)] && a < b);
  });
  double mass = 0;
  size_t n = 0;
  while (mass < p.top_p) mass += prob[size_t(order[n++])];
  ASSERT_GT(n, 20u);
  ASSERT_LT(n, 90u);  // the cut falls inside the head, between tokens of near-equal probability
  const std::set<int32_t> nucleus(order.begin(), order.begin() + int64_t(n));
  std::set<int32_t> drawn;
  for (uint64_t s = 0; s < 2000; ++s) {
    const int32_t t = first_token(p, x, s);
    ASSERT_TRUE(nucleus.count(t)) << "token " << t << " outside the nucleus of " << n << " (seed "
                                  << s << ")";
    drawn.insert(t);
  }
  EXPECT_TRUE(drawn.count(order[n - 1])) << "the nucleus's last token was never drawn";
}

TEST(Sampler, MinPDropsTokensBelowTheFractionOfTheTop) {
  // Probabilities 0.15, 0.5, 0.05, 0.3 by id.
  const std::vector<float> x = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  SamplingParams p;
  p.min_p = 0.2f;  // keeps p >= 0.1
  EXPECT_LT(chi_square(first_token_counts(p, x, 8000), {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95}),
            chi_square_bound(2));
  p.min_p = 0.5f;  // keeps p >= 0.25
  EXPECT_LT(chi_square(first_token_counts(p, x, 8000), {0, 0.5 / 0.8, 0, 0.3 / 0.8}),
            chi_square_bound(1));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOncePerToken) {
  const std::vector<float> x = {2.0f, 1.5f, -1.0f, -1.2f, 0.3f};
  SamplingParams p = greedy_with_logprobs();
  p.repetition_penalty = 2.0f;
  SequenceSampler s(p, {0, 2, 0, -1, 99}, 0);         // ids outside the vocab are ignored
  EXPECT_EQ(s.sample(x.data(), 5, kNoEos).token, 1);  // 2.0 / 2 = 1.0 < 1.5
  expect_near_all(all_logprobs(s, x), log_softmax({1.0f, 1.5f, -2.0f, -1.2f, 0.3f}));
  s.accept(1);  // generated tokens count too, but only once however often they repeat
  s.accept(1);
  EXPECT_EQ(s.sample(x.data(), 5, kNoEos).token, 0);  // 1.5 / 2 = 0.75 < 1.0
  expect_near_all(all_logprobs(s, x), log_softmax({1.0f, 0.75f, -2.0f, -1.2f, 0.3f}));
  EXPECT_EQ(first_token(greedy_with_logprobs(), x, 0), 0);  // without the penalty
}

TEST(Sampler, FrequencyPenaltyScalesWithTheOutputCountAndIgnoresThePrompt) {
  const std::vector<float> x = {3.0f, 2.0f, 0.0f};
  SamplingParams p = greedy_with_logprobs();
  p.frequency_penalty = 0.6f;
  SequenceSampler s(p, {0, 0, 0}, 0);
  EXPECT_EQ(s.sample(x.data(), 3, kNoEos).token, 0);
  s.accept(0);
  EXPECT_EQ(s.sample(x.data(), 3, kNoEos).token, 0);  // 3.0 - 0.6 = 2.4
  s.accept(0);
  EXPECT_EQ(s.sample(x.data(), 3, kNoEos).token, 1);  // 3.0 - 1.2 = 1.8
  expect_near_all(all_logprobs(s, x), log_softmax({3.0f - 0.6f * 2.0f, 2.0f, 0.0f}));
}

TEST(Sampler, PresencePenaltyIsSubtractedOnceForGeneratedTokensOnly) {
  const std::vector<float> x = {3.0f, 2.5f};
  SamplingParams p = greedy_with_logprobs();
  p.presence_penalty = 0.4f;
  SequenceSampler s(p, {0}, 0);
  EXPECT_EQ(s.sample(x.data(), 2, kNoEos).token, 0);  // the prompt does not count
  for (int i = 0; i < 3; ++i) s.accept(0);
  EXPECT_EQ(s.sample(x.data(), 2, kNoEos).token, 0);  // 2.6 however many times: flat
  expect_near_all(all_logprobs(s, x), log_softmax({3.0f - 0.4f, 2.5f}));
  p.presence_penalty = 0.6f;
  SequenceSampler t(p, {}, 0);
  t.accept(0);
  EXPECT_EQ(t.sample(x.data(), 2, kNoEos).token, 1);  // 2.4 < 2.5
  p.presence_penalty = -0.6f;                         // a negative penalty encourages repeats
  SequenceSampler u(p, {}, 0);
  u.accept(1);
  EXPECT_EQ(u.sample(x.data(), 2, kNoEos).token, 1);  // 3.1 > 3.0
}

TEST(Sampler, PenaltiesApplyRepetitionThenFrequencyThenPresence) {
  const std::vector<float> x = {3.0f, 0.0f, -0.5f};
  SamplingParams p = greedy_with_logprobs();
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  SequenceSampler s(p, {0, 2}, 0);
  s.accept(0);
  s.accept(0);
  // Token 0: 3.0 / 2 - 0.5 * 2 - 0.25 = 0.25 (the other order would give 0.875). Token 2: -1.0.
  expect_near_all(all_logprobs(s, x), log_softmax({0.25f, 0.0f, -1.0f}));
  EXPECT_EQ(s.sample(x.data(), 3, kNoEos).token, 0);
}

TEST(Sampler, MinTokensMasksEosAndStopIdsUntilReached) {
  const std::vector<int> eos = {4};
  const std::vector<float> x = {0.0f, 1.0f, 3.0f, 2.0f, 5.0f, 4.0f};
  SamplingParams p = greedy_with_logprobs();
  p.min_tokens = 3;
  p.stop_token_ids = {5};
  SequenceSampler s(p, {}, 0);
  for (int i = 0; i < 3; ++i) {
    const SampledToken t = s.sample(x.data(), 6, eos);
    EXPECT_EQ(t.token, 2) << "step " << i;
    for (auto [id, lp] : t.top_logprobs) EXPECT_TRUE(id != 4 && id != 5) << "masked id " << id;
    EXPECT_EQ(t.top_logprobs.size(), 4u);
    EXPECT_NEAR(t.logprob, log_softmax({0.0f, 1.0f, 3.0f, 2.0f})[2], 1e-6);
    s.accept(t.token);
  }
  EXPECT_EQ(s.sample(x.data(), 6, eos).token, 4);

  SamplingParams q;  // random draws are held back from eos as well
  q.min_tokens = 1;
  q.stop_token_ids = {5};
  for (uint64_t seed = 0; seed < 500; ++seed) {
    const int32_t t = SequenceSampler(q, {}, seed).sample(x.data(), 6, eos).token;
    ASSERT_TRUE(t != 4 && t != 5) << "seed " << seed;
  }
}

// An output grammar's mask wins over min_tokens where it allows only tokens that end the output
// (a complete constrained value); where it allows another token too, min_tokens still holds.
TEST(Sampler, MinTokensYieldsToAGrammarThatAllowsOnlyTheEnd) {
  const std::vector<int> eos = {4};
  const std::vector<float> x = {0.0f, 1.0f, 3.0f, 2.0f, 5.0f, 4.0f};
  SamplingParams p = greedy_with_logprobs();
  p.min_tokens = 3;
  p.stop_token_ids = {5};
  const SequenceSampler s(p, {}, 0);
  const uint32_t only_ends = (1u << 4) | (1u << 5), end_or_two = (1u << 2) | (1u << 4);
  EXPECT_EQ(s.sample(x.data(), 6, eos, &only_ends).token, 4);
  EXPECT_EQ(s.sample(x.data(), 6, eos, &end_or_two).token, 2);
  std::vector<float> w;
  s.target_weights(x.data(), 6, eos, w, &only_ends);
  EXPECT_EQ(w[4], 1.0f);
}

TEST(Sampler, IgnoreEosOnlyChangesStoppingNotSampling) {
  const std::vector<int> eos = {4};
  const std::vector<float> x = {0.0f, 1.0f, 3.0f, 2.0f, 5.0f, 4.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.min_tokens = 2;
  p.stop_token_ids = {5};
  SequenceSampler s(p, {}, 0);
  EXPECT_EQ(s.sample(x.data(), 6, eos).token, 4);  // eos ends nothing, so min_tokens keeps it
  EXPECT_FALSE(s.is_stop(4, eos));
  EXPECT_TRUE(s.is_stop(5, eos));  // stop ids stop even with ignore_eos
  EXPECT_FALSE(s.is_stop(2, eos));
  const std::vector<float> y = {0.0f, 1.0f, 3.0f, 2.0f, 4.0f, 5.0f};
  EXPECT_EQ(s.sample(y.data(), 6, eos).token, 4);  // but the stop id is still held back
  p.ignore_eos = false;
  EXPECT_TRUE(SequenceSampler(p, {}, 0).is_stop(4, eos));
}

TEST(Sampler, LogprobsEqualDoublePrecisionLogSoftmaxAndAreSorted) {
  std::vector<float> x = random_logits(3000, 17);
  const float top = x[size_t(reference_argmax(x))] + 0.5f;
  x[2500] = top;  // a tie at the top: the lower id comes first
  x[900] = top;
  const std::vector<double> ref = log_softmax(x);
  std::vector<int32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return x[size_t(a)] > x[size_t(b)]; });

  SamplingParams p;
  p.logprobs = true;
  p.top_logprobs = 20;
  std::vector<float> first_logprobs;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const SampledToken t = SequenceSampler(p, {}, seed).sample(x.data(), 3000, kNoEos);
    EXPECT_NEAR(t.logprob, ref[size_t(t.token)], 1e-5) << "token " << t.token;
    ASSERT_EQ(t.top_logprobs.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      EXPECT_EQ(t.top_logprobs[i].first, order[i]) << "rank " << i;
      EXPECT_NEAR(t.top_logprobs[i].second, ref[size_t(order[i])], 1e-5) << "rank " << i;
      if (i > 0) {
        EXPECT_GE(t.top_logprobs[i - 1].second, t.top_logprobs[i].second) << "rank " << i;
      }
    }
    first_logprobs.push_back(t.top_logprobs[0].second);
  }
  EXPECT_EQ(SequenceSampler(p, {}, 0).sample(x.data(), 3000, kNoEos).top_logprobs[0].first, 900);

  // Temperature and truncation change the draw, not the reported logprobs.
  p.temperature = 0.3f;
  p.top_k = 5;
  p.top_p = 0.5f;
  p.min_p = 0.1f;
  const SampledToken t = SequenceSampler(p, {}, 0).sample(x.data(), 3000, kNoEos);
  EXPECT_NEAR(t.logprob, ref[size_t(t.token)], 1e-5);
  EXPECT_EQ(t.top_logprobs[0].second, first_logprobs[0]);

  p.logprobs = false;
  p.top_logprobs = 0;
  const SampledToken quiet = SequenceSampler(p, {}, 0).sample(x.data(), 3000, kNoEos);
  EXPECT_EQ(quiet.logprob, 0.0f);
  EXPECT_TRUE(quiet.top_logprobs.empty());
}

TEST(Sampler, AnInfiniteLogitTakesAllTheMass) {
  SamplingParams p;
  p.logprobs = true;
  p.top_logprobs = 3;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const std::vector<float> one = {0.0f, kInf, 1.0f};
    const SampledToken t = SequenceSampler(p, {}, seed).sample(one.data(), 3, kNoEos);
    ASSERT_EQ(t.token, 1);
    EXPECT_EQ(t.logprob, 0.0f);
    ASSERT_EQ(t.top_logprobs.size(), 1u);  // the others have probability 0
  }
  const std::vector<float> two = {kInf, 0.0f, kInf};
  std::set<int32_t> drawn;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const SampledToken t = SequenceSampler(p, {}, seed).sample(two.data(), 3, kNoEos);
    drawn.insert(t.token);
    EXPECT_NEAR(t.logprob, -std::log(2.0), 1e-6);
  }
  EXPECT_EQ(drawn, (std::set<int32_t>{0, 2}));
}

TEST(Sampler, ThrowsWhenNoTokenCanBeDrawn) {
  const std::vector<float> nans(8, kNaN);
  for (float t : {0.0f, 1.0f}) {
    SamplingParams p;
    p.temperature = t;
    EXPECT_THROW(SequenceSampler(p, {}, 0).sample(nans.data(), 8, kNoEos), Error);
  }
  SamplingParams p;
  p.min_tokens = 1;
  const std::vector<float> only_eos = {-kInf, 1.0f, kNaN};
  try {
    SequenceSampler(p, {}, 0).sample(only_eos.data(), 3, {1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("min_tokens 1"), std::string::npos) << e.what();
  }
}

TEST(Sampler, ConstructorRejectsInvalidParams) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_THROW({ SequenceSampler s(p, {}, 0); }, Error);
}

}  // namespace
}  // namespace sparkglm
