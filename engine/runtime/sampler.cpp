#include "engine/runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
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
// The draw first finds the block of this many tokens where the CDF crosses u, then the token.
constexpr int64_t kBlock = 256;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A token's place in the order "most probable first, ties by lower id" as one integer: the
// weight's bits (monotone for w >= 0) above the complemented id. Larger key = earlier; integer
// compares keep the selections below cheap and deterministic.
uint64_t order_key(float w, int64_t id) {
  return (uint64_t(std::bit_cast<uint32_t>(w)) << 32) | uint64_t(~uint32_t(id));
}
float key_weight(uint64_t key) {
  return std::bit_cast<float>(uint32_t(key >> 32));
}

// Per-thread buffers: sample() runs for many sequences per step, and a 154880-entry vocab makes
// fresh allocations per call cost more than the arithmetic.
struct Scratch {
  std::vector<float> logits;   // [vocab] processed logits
  std::vector<float> weights;  // [vocab] exp((x - max) / T) = p / p_max
  std::vector<double> blocks;  // [ceil(vocab / kBlock)] sums of weights
  std::vector<uint64_t> keys;  // order keys of candidate tokens
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Independent lanes, written as compare-and-select, let the compiler vectorise; max is exact in
// any order.
float max_of(const float* x, int64_t n) {
  float lane[16];
  std::fill(lane, lane + 16, kNegInf);
  const int64_t full = n - n % 16;
  for (int64_t i = 0; i < full; i += 16)
    for (int j = 0; j < 16; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  float m = kNegInf;
  for (float v : lane) m = std::max(m, v);
  for (int64_t i = full; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// Sum in a fixed order (8 interleaved partial sums, then left to right): the same on every run.
double sum_of(const float* w, int64_t n) {
  double lane[8] = {};
  const int64_t full = n - n % 8;
  for (int64_t i = 0; i < full; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += double(w[i + j]);
  double s = 0.0;
  for (double v : lane) s += v;
  for (int64_t i = full; i < n; ++i) s += double(w[i]);
  return s;
}

// The k largest keys of the tokens with w > 0, unordered: a buffer that is cut back to its top k
// whenever it reaches 2k, so the cost is O(vocab) for any k.
void select_top_k(const float* w, int64_t vocab, int64_t k, std::vector<uint64_t>& keys) {
  keys.clear();
  keys.reserve(size_t(std::min(2 * k, vocab)));
  uint64_t floor = 0;  // the k-th largest key so far; nothing at or below it can make the top k
  auto cut_back = [&] {
    std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end(), std::greater<uint64_t>());
    keys.resize(size_t(k));
    floor = keys.back();
  };
  for (int64_t i = 0; i < vocab; ++i) {
    if (!(w[i] > 0.0f)) continue;
    const uint64_t key = order_key(w[i], i);
    if (key <= floor) continue;
    keys.push_back(key);
    if (int64_t(keys.size()) == 2 * k) cut_back();
  }
  if (int64_t(keys.size()) > k) cut_back();
}

// Reorders `keys` and returns the key of the last token of the smallest most-probable prefix
// whose weight reaches `need`. A quickselect on mass (split at the middle, keep the half that
// holds the crossing), so O(size) rather than a sort.
uint64_t nucleus_cut(std::vector<uint64_t>& keys, double need) {
  // [0, lo) is kept and precedes [lo, hi); the crossing is in [lo, hi).
  size_t lo = 0, hi = keys.size();
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(keys.begin() + int64_t(lo), keys.begin() + int64_t(mid),
                     keys.begin() + int64_t(hi), std::greater<uint64_t>());
    double left = 0.0;
    for (size_t j = lo; j < mid; ++j) left += double(key_weight(keys[j]));
    if (left >= need) {
      hi = mid;
    } else {
      need -= left;
      lo = mid;
    }
  }
  return keys[lo];
}

// The nucleus cut over the whole vocab. Weights in (0, 1] fall into buckets by float exponent
// (a factor of 2 each); the buckets above the one where the running mass reaches `top_p` are
// kept whole, so only that bucket's tokens need ordering. Returns 0 (keep all) if rounding
// leaves no crossing.
uint64_t nucleus_cut_vocab(const float* w, int64_t vocab, float top_p,
                           std::vector<uint64_t>& keys) {
  constexpr int kLanes = 4;  // separate histograms, so consecutive adds rarely wait on each other
  double lanes[kLanes][256] = {};
  for (int64_t i = 0; i < vocab; ++i)
    lanes[i % kLanes][std::bit_cast<uint32_t>(w[i]) >> 23] += w[i];
  double bucket[256];
  double total = 0.0;
  for (int e = 0; e < 256; ++e) {
    bucket[e] = 0.0;
    for (int l = 0; l < kLanes; ++l) bucket[e] += lanes[l][e];
    total += bucket[e];
  }
  const double target = double(top_p) * total;
  double above = 0.0;
  int e = 255;
  while (e > 0 && above + bucket[e] < target) above += bucket[e--];
  keys.clear();
  for (int64_t i = 0; i < vocab; ++i)
    if (w[i] > 0.0f && int(std::bit_cast<uint32_t>(w[i]) >> 23) == e)
      keys.push_back(order_key(w[i], i));
  return keys.empty() ? 0 : nucleus_cut(keys, target - above);
}

// log_softmax of the processed logits: double accumulation of exp(x - max). A +inf logit takes
// all the mass, shared equally with any other +inf.
class LogSoftmax {
 public:
  LogSoftmax(const float* x, int64_t vocab, float m, std::vector<float>& scratch_weights) {
    if (m == kPosInf) {
      int64_t n = 0;
      for (int64_t i = 0; i < vocab; ++i) n += x[i] == kPosInf;
      inf_logprob_ = -std::log(double(n));
      infinite_ = true;
      return;
    }
    scratch_weights.resize(size_t(vocab));
    float* e = scratch_weights.data();
    for (int64_t i = 0; i < vocab; ++i) e[i] = exp_nonpositive(x[i] - m);
    log_sum_exp_ = double(m) + std::log(sum_of(e, vocab));
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

// The ids of the n largest logits other than -inf, descending, ties by lower id. n <= 20, so a
// short sorted list, and most of the vocab is passed over 16 at a time below its last entry.
std::vector<int32_t> top_ids(const float* x, int64_t vocab, int n) {
  std::vector<int32_t> best;
  if (n <= 0) return best;
  best.reserve(size_t(n) + 1);
  float floor = kNegInf;  // an entry must beat this; ids rise, so an equal later id stays out
  for (int64_t c = 0; c < vocab; c += 16) {
    const int64_t end = std::min(vocab, c + 16);
    bool any = false;
    for (int64_t i = c; i < end; ++i) any |= x[i] > floor;
    if (!any) continue;
    for (int64_t i = c; i < end; ++i) {
      const float xi = x[i];
      if (!(xi > floor)) continue;
      auto pos = std::find_if(best.begin(), best.end(), [&](int32_t b) { return xi > x[b]; });
      best.insert(pos, int32_t(i));
      if (int(best.size()) > n) best.pop_back();
      if (int(best.size()) == n) floor = x[best.back()];
    }
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

float exp_nonpositive(float z) {
  const float zc = std::max(z, -87.0f);  // also maps -inf to a finite value for the bit work
  // e^z = 2^n * e^r with n = round(z / ln 2) in [-126, 0] and |r| <= ln(2) / 2.
  const float n = (zc * 1.44269504f + 12582912.0f) - 12582912.0f;  // 1.5 * 2^23 rounds to int
  const float r = (zc - n * 0.693359375f) - n * -2.12194440e-4f;   // ln 2 split in two parts
  float p = 1.0f / 5040.0f;  // the Taylor series of e^r to r^7: error below 1.2e-7 for |r| <= 0.35
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>((int32_t(n) + 127) << 23);
  return z < -87.0f ? 0.0f : p * scale;
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

bool SequenceSampler::only_stops_allowed(const uint32_t* allowed, int64_t vocab,
                                         const std::vector<int>& eos_ids) const {
  for (int64_t w = 0; w < (vocab + 31) / 32; ++w)
    for (uint32_t bits = allowed[w]; bits != 0; bits &= bits - 1) {
      const int64_t id = w * 32 + std::countr_zero(bits);
      if (id < vocab && !is_stop(int32_t(id), eos_ids)) return false;
    }
  return true;
}

void SequenceSampler::apply_masks_and_penalties(float* x, int64_t vocab,
                                                const std::vector<int>& eos_ids,
                                                const uint32_t* allowed) const {
  auto in_vocab = [vocab](int64_t id) { return id >= 0 && id < vocab; };
  if (allowed) apply_token_mask(allowed, x, vocab);
  if (generated_ < params_.min_tokens &&
      !(allowed && only_stops_allowed(allowed, vocab, eos_ids))) {
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

float* SequenceSampler::kept_weights(const float* x, int64_t vocab, float m) const {
  Scratch& s = scratch();
  s.weights.resize(size_t(vocab));
  float* w = s.weights.data();
  // softmax(x / T) up to the factor p_max, from x - max so that a small T cannot overflow.
  const float t = params_.temperature;
  if (m == kPosInf) {
    for (int64_t i = 0; i < vocab; ++i) w[i] = x[i] == kPosInf ? 1.0f : 0.0f;
  } else {
    for (int64_t i = 0; i < vocab; ++i) w[i] = exp_nonpositive((x[i] - m) / t);
  }

  // Every filter keeps a prefix of the key order, so one threshold key describes what is kept.
  // min_p's rule p / p_max >= min_p is the weight threshold min_p itself; applied after top-k and
  // top-p (whose masses it does not change), it can only shorten their prefix.
  uint64_t threshold = uint64_t(std::bit_cast<uint32_t>(params_.min_p)) << 32;
  const int64_t k = params_.top_k > 0 && params_.top_k < vocab ? params_.top_k : 0;
  auto& keys = s.keys;
  if (k > 0) {
    select_top_k(w, vocab, k, keys);
    if (int64_t(keys.size()) == k)
      threshold = std::max(threshold, *std::min_element(keys.begin(), keys.end()));
  }
  if (params_.top_p < 1.0f) {
    if (k > 0) {
      double mass = 0.0;
      for (uint64_t key : keys) mass += double(key_weight(key));
      threshold = std::max(threshold, nucleus_cut(keys, double(params_.top_p) * mass));
    } else {
      threshold = std::max(threshold, nucleus_cut_vocab(w, vocab, params_.top_p, keys));
    }
  }
  if (threshold > 0) {
    // Written as two plain selects, which vectorise: below the weight, then ties after the id.
    const float cut_w = key_weight(threshold);
    const int64_t cut_id = int64_t(uint32_t(~threshold));
    for (int64_t i = 0; i < vocab; ++i) w[i] = w[i] >= cut_w ? w[i] : 0.0f;
    for (int64_t i = cut_id + 1; i < vocab; ++i) w[i] = w[i] == cut_w ? 0.0f : w[i];
  }
  return w;
}

int32_t SequenceSampler::draw(const float* x, int64_t vocab, float m) const {
  Scratch& s = scratch();
  const float* w = kept_weights(x, vocab, m);

  // Inverse CDF in id order: find the block where the running sum passes u * total, then the
  // token inside it.
  const int64_t n_blocks = (vocab + kBlock - 1) / kBlock;
  s.blocks.resize(size_t(n_blocks));
  double total = 0.0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t lo = b * kBlock;
    s.blocks[size_t(b)] = sum_of(w + lo, std::min(kBlock, vocab - lo));
    total += s.blocks[size_t(b)];
  }
  const double target = sampling_uniform(seed_, uint64_t(generated_)) * total;
  double cumulative = 0.0;
  int64_t b = 0;
  while (b + 1 < n_blocks && cumulative + s.blocks[size_t(b)] <= target)
    cumulative += s.blocks[size_t(b++)];
  const int64_t lo = b * kBlock, hi = std::min(vocab, lo + kBlock);
  int32_t last = -1;
  for (int64_t i = lo; i < hi; ++i) {
    if (!(w[i] > 0.0f)) continue;
    last = int32_t(i);
    cumulative += double(w[i]);
    if (cumulative > target) return last;
  }
  // Rounding may end the walk a little short of the target: take the last kept token.
  for (int64_t i = lo - 1; last < 0 && i >= 0; --i)
    if (w[i] > 0.0f) last = int32_t(i);
  SPARKGLM_ASSERT(last >= 0, "the top token always keeps its weight of 1");
  return last;
}

bool SequenceSampler::plain_greedy_at(int index) const {
  return params_.greedy() && plain_draw_at(index);
}

bool SequenceSampler::raw_greedy_at(int index) const {
  return params_.greedy() && raw_logits_at(index);
}

bool SequenceSampler::plain_draw_at(int index) const {
  return !params_.logprobs && raw_logits_at(index);
}

bool SequenceSampler::raw_logits_at(int index) const {
  const SamplingParams& p = params_;
  return p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f &&
         p.presence_penalty == 0.0f && index >= p.min_tokens;
}

RowDraw SequenceSampler::row_draw(int index) const {
  RowDraw d;
  d.temperature = params_.greedy() ? 0.0f : params_.temperature;
  d.top_p = params_.top_p;
  d.min_p = params_.min_p;
  d.top_k = params_.top_k;
  d.seed = seed_;
  d.index = uint64_t(index);
  return d;
}

const float* SequenceSampler::masked_logits(const float* logits, int64_t vocab,
                                            const std::vector<int>& eos_ids,
                                            const uint32_t* allowed, float& max_logit) const {
  std::vector<float>& row = scratch().logits;
  row.resize(size_t(vocab));
  float* x = row.data();
  for (int64_t i = 0; i < vocab; ++i) x[i] = std::isnan(logits[i]) ? kNegInf : logits[i];
  apply_masks_and_penalties(x, vocab, eos_ids, allowed);
  max_logit = max_of(x, vocab);
  if (max_logit == kNegInf) nothing_to_sample(vocab, generated_, params_.min_tokens);
  return x;
}

void SequenceSampler::target_weights(const float* logits, int64_t vocab,
                                     const std::vector<int>& eos_ids, std::vector<float>& weights,
                                     const uint32_t* allowed) const {
  float m = 0.0f;
  const float* x = masked_logits(logits, vocab, eos_ids, allowed, m);
  weights.assign(size_t(vocab), 0.0f);
  if (params_.greedy()) {
    weights[size_t(std::find(x, x + vocab, m) - x)] = 1.0f;
  } else {
    const float* w = kept_weights(x, vocab, m);
    std::copy_n(w, vocab, weights.begin());
  }
}

SampledToken SequenceSampler::sample(const float* logits, int64_t vocab,
                                     const std::vector<int>& eos_ids,
                                     const uint32_t* allowed) const {
  SPARKGLM_ASSERT(logits != nullptr && vocab > 0, "sample() needs a non-empty logits row");
  float m = 0.0f;
  const float* x = masked_logits(logits, vocab, eos_ids, allowed, m);

  SampledToken out;
  if (params_.greedy()) {
    out.token = int32_t(std::find(x, x + vocab, m) - x);  // the first maximum
  } else {
    out.token = draw(x, vocab, m);
  }
  if (params_.logprobs) {
    const LogSoftmax log_softmax(x, vocab, m, scratch().weights);
    out.logprob = log_softmax(x[out.token]);
    for (int32_t id : top_ids(x, vocab, params_.top_logprobs)) {
      const float lp = log_softmax(x[id]);
      if (lp > kNegInf) out.top_logprobs.emplace_back(id, lp);
    }
  }
  return out;
}

}  // namespace sparkglm
