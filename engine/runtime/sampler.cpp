#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/core/error.h"

namespace sparkglm {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr uint64_t kWeyl = 0x9e3779b97f4a7c15ull;  // 2^64 / golden ratio, odd
// Keeps the key of seed s away from the raw Weyl state of seed s + k * kWeyl.
constexpr uint64_t kSeedSalt = 0x2545f4914f6cdd1dull;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A token's weight w = exp((x - max) / T) = p / p_max, with its id.
struct Candidate {
  float w;
  int32_t id;
};

// The fixed order of "most probable first": higher weight, then lower id. A strict total order,
// so every selection below is deterministic.
bool before(const Candidate& a, const Candidate& b) {
  return a.w > b.w || (a.w == b.w && a.id < b.id);
}

// Per-thread buffers: sample() runs for many sequences per step, and a 154880-entry vocab makes
// fresh allocations per call cost more than the arithmetic.
struct Scratch {
  std::vector<float> logits;   // [vocab] processed logits
  std::vector<float> weights;  // [vocab] exp((x - max) / T)
  std::vector<Candidate> candidates;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

float max_of(const float* x, int64_t vocab) {
  float m = kNegInf;
  for (int64_t i = 0; i < vocab; ++i) m = std::max(m, x[i]);
  return m;
}

// The lowest id among the maxima, or -1 when every entry is -inf. NaN is already gone.
int32_t first_argmax(const float* x, int64_t vocab) {
  int32_t best = -1;
  float best_x = kNegInf;
  for (int64_t i = 0; i < vocab; ++i)
    if (x[i] > best_x) {
      best_x = x[i];
      best = int32_t(i);
    }
  return best;
}

// Reorders `c` and returns n, the size of the smallest prefix in `before` order whose weight
// reaches `need`; c[n-1] is then the least probable token of that prefix. A quickselect on mass
// (split at the middle, keep the half that holds the crossing), so O(size) rather than a sort.
size_t nucleus_size(std::vector<Candidate>& c, double need) {
  size_t lo = 0, hi = c.size();  // [0, lo) is kept and precedes [lo, hi); the crossing is in [lo, hi)
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(c.begin() + int64_t(lo), c.begin() + int64_t(mid), c.begin() + int64_t(hi),
                     before);
    double left = 0.0;
    for (size_t j = lo; j < mid; ++j) left += c[j].w;
    if (left >= need) {
      hi = mid;
    } else {
      need -= left;
      lo = mid;
    }
  }
  return lo + 1;
}

// log_softmax of the processed logits in double precision. A +inf logit takes all the mass,
// shared equally with any other +inf.
class LogSoftmax {
 public:
  LogSoftmax(const float* x, int64_t vocab) {
    const float m = max_of(x, vocab);
    if (m == kPosInf) {
      int64_t n = 0;
      for (int64_t i = 0; i < vocab; ++i) n += x[i] == kPosInf;
      inf_logprob_ = -std::log(double(n));
      infinite_ = true;
      return;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(x[i]) - double(m));
    log_sum_exp_ = double(m) + std::log(sum);
  }
  float operator()(float x) const {
    if (infinite_) return x == kPosInf ? float(inf_logprob_) : kNegInf;
    return float(double(x) - log_sum_exp_);
  }

 private:
  bool infinite_ = false;
  double inf_logprob_ = 0.0;
  double log_sum_exp_ = 0.0;
};

// The ids of the n largest finite-or-+inf logits, descending, ties by lower id. n <= 20, so an
// insertion into a short sorted list beats sorting the vocab.
std::vector<int32_t> top_ids(const float* x, int64_t vocab, int n) {
  std::vector<int32_t> best;
  if (n <= 0) return best;
  best.reserve(size_t(n) + 1);
  for (int64_t i = 0; i < vocab; ++i) {
    const float xi = x[i];
    if (xi == kNegInf) continue;
    if (int(best.size()) == n && !(xi > x[best.back()])) continue;
    // Ids arrive in increasing order, so an equal earlier id keeps its place ahead.
    auto pos = std::find_if(best.begin(), best.end(), [&](int32_t b) { return xi > x[b]; });
    best.insert(pos, int32_t(i));
    if (int(best.size()) > n) best.pop_back();
  }
  return best;
}

[[noreturn]] void nothing_to_sample(int64_t vocab, int generated, int min_tokens) {
  throw Error(ErrorKind::kInvalidArgument,
              "sampler: no token can be drawn from " + std::to_string(vocab) +
                  " logits: every one is NaN, -inf or masked (generated " +
                  std::to_string(generated) + " of min_tokens " + std::to_string(min_tokens) + ")");
}

}  // namespace

double sampling_uniform(uint64_t seed, uint64_t index) {
  const uint64_t z = mix64(mix64(seed ^ kSeedSalt) + kWeyl * (index + 1));
  return double(z >> 11) * 0x1.0p-53;  // the top 53 bits: exactly representable, < 1
}

SequenceSampler::SequenceSampler(const SamplingParams& params, std::vector<int32_t> prompt_tokens,
                                 uint64_t fallback_seed)
    : params_(params), seed_(params.seed.value_or(fallback_seed)) {
  params_.validate();
  // Only the repetition penalty looks at the prompt; without it the prompt need not be kept.
  if (params_.repetition_penalty != 1.0f) {
    prompt_seen_ = std::move(prompt_tokens);
    std::sort(prompt_seen_.begin(), prompt_seen_.end());
    prompt_seen_.erase(std::unique(prompt_seen_.begin(), prompt_seen_.end()), prompt_seen_.end());
  }
}

void SequenceSampler::accept(int32_t token) {
  ++output_counts_[token];
  ++generated_;
}

bool SequenceSampler::is_stop(int32_t token, const std::vector<int>& eos_ids) const {
  const auto& stops = params_.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return true;
  return !params_.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
}

void SequenceSampler::apply_masks_and_penalties(float* x, int64_t vocab,
                                                const std::vector<int>& eos_ids) const {
  auto in_vocab = [vocab](int64_t id) { return id >= 0 && id < vocab; };
  if (generated_ < params_.min_tokens) {
    for (int32_t id : params_.stop_token_ids)
      if (in_vocab(id)) x[id] = kNegInf;
    if (!params_.ignore_eos)
      for (int id : eos_ids)
        if (in_vocab(id)) x[id] = kNegInf;
  }
  const float r = params_.repetition_penalty;
  if (r != 1.0f) {
    auto penalise = [&](int32_t id) {
      if (in_vocab(id)) x[id] = x[id] > 0.0f ? x[id] / r : x[id] * r;
    };
    for (int32_t id : prompt_seen_) penalise(id);
    // Once per distinct token: generated tokens already in the prompt were penalised above.
    for (const auto& [id, count] : output_counts_)
      if (!std::binary_search(prompt_seen_.begin(), prompt_seen_.end(), id)) penalise(id);
  }
  const float f = params_.frequency_penalty, p = params_.presence_penalty;
  if (f != 0.0f || p != 0.0f) {
    for (const auto& [id, count] : output_counts_) {
      if (!in_vocab(id)) continue;
      x[id] -= f * float(count);
      x[id] -= p;
    }
  }
}

int32_t SequenceSampler::draw(const float* x, int64_t vocab) const {
  Scratch& s = scratch();
  const float m = max_of(x, vocab);
  const float t = params_.temperature;
  s.weights.resize(size_t(vocab));
  float* w = s.weights.data();
  // softmax(x / T) up to the factor p_max, computed from x - max so that a small T cannot
  // overflow; the maxima get exactly 1, which also keeps +inf - +inf out.
  for (int64_t i = 0; i < vocab; ++i) w[i] = x[i] == m ? 1.0f : std::exp((x[i] - m) / t);

  // top-k and top-p keep a prefix of the `before` order; `cut` is its last token.
  const int64_t k = params_.top_k > 0 && params_.top_k < vocab ? params_.top_k : 0;
  bool truncated = false;
  Candidate cut{0.0f, 0};
  if (k > 0 || params_.top_p < 1.0f) {
    auto& c = s.candidates;
    c.clear();
    c.reserve(size_t(vocab));
    for (int64_t i = 0; i < vocab; ++i)
      if (w[i] > 0.0f) c.push_back({w[i], int32_t(i)});
    if (k > 0 && size_t(k) < c.size()) {
      std::nth_element(c.begin(), c.begin() + (k - 1), c.end(), before);
      c.resize(size_t(k));
      cut = c.back();
      truncated = true;
    }
    if (params_.top_p < 1.0f) {
      double total = 0.0;
      for (const Candidate& e : c) total += e.w;
      const size_t n = nucleus_size(c, double(params_.top_p) * total);
      cut = c[n - 1];
      truncated = true;
    }
  }
  // p / p_max >= min_p is min_p's rule; w > 0 drops tokens whose probability underflowed.
  const float min_w = params_.min_p;
  auto kept = [&](int64_t i) {
    if (!(w[i] > 0.0f) || w[i] < min_w) return false;
    return !truncated || w[i] > cut.w || (w[i] == cut.w && i <= cut.id);
  };

  double total = 0.0;
  for (int64_t i = 0; i < vocab; ++i)
    if (kept(i)) total += w[i];
  const double target = sampling_uniform(seed_, uint64_t(generated_)) * total;
  // The same summation order as `total`, so the walk ends on the last kept token at the latest.
  double cumulative = 0.0;
  int32_t last = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!kept(i)) continue;
    cumulative += w[i];
    last = int32_t(i);
    if (cumulative > target) return last;
  }
  return last;
}

SampledToken SequenceSampler::sample(const float* logits, int64_t vocab,
                                     const std::vector<int>& eos_ids) const {
  SPARKGLM_ASSERT(logits != nullptr && vocab > 0, "sample() needs a non-empty logits row");
  Scratch& s = scratch();
  s.logits.resize(size_t(vocab));
  float* x = s.logits.data();
  for (int64_t i = 0; i < vocab; ++i) x[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
  apply_masks_and_penalties(x, vocab, eos_ids);

  SampledToken out;
  if (params_.greedy()) {
    out.token = first_argmax(x, vocab);
  } else if (max_of(x, vocab) > kNegInf) {
    out.token = draw(x, vocab);
  }
  if (out.token < 0) nothing_to_sample(vocab, generated_, params_.min_tokens);

  if (params_.logprobs) {
    const LogSoftmax log_softmax(x, vocab);
    out.logprob = log_softmax(x[out.token]);
    for (int32_t id : top_ids(x, vocab, params_.top_logprobs)) {
      const float lp = log_softmax(x[id]);
      if (lp > kNegInf) out.top_logprobs.emplace_back(id, lp);
    }
  }
  return out;
}

}  // namespace sparkglm
