#pragma once
// Batch invariance through the scheduler, for any ModelRunner: each request runs alone, then all
// of them together under a different prefill budget and with staggered arrivals, so that prefill
// pieces and decode rows share steps in compositions that change from step to step and prompts
// are cut at different places. Every request's token ids, chosen logprobs and top logprobs must be
// equal bit for bit (a logprob is a function of the whole logit row, so equal logprobs at every
// step mean equal logit rows up to a shift).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model_runner.h"
#include "engine/runtime/scheduler.h"

namespace sparkglm::invariance {

struct Output {
  std::vector<GeneratedToken> tokens;
};

struct Mix {
  std::vector<int> prompt_lengths;  // one request each
  int max_tokens = 12;
  int vocab_mod = 256;   // prompt tokens are drawn below this
  bool logprobs = true;  // false: plain greedy picks, so steps are pipelined
};

// Eight sequences at once, `prefill_budget` prompt rows a step, requests up to `max_seq_len`.
inline SchedulerLimits limits(int prefill_budget, int max_seq_len) {
  SchedulerLimits l;
  l.max_num_seqs = 8;
  l.max_batch_size = 8;
  l.max_prefill_tokens = prefill_budget;
  l.max_seq_len = max_seq_len;
  return l;
}

inline std::vector<int32_t> prompt(int request, int length, int vocab_mod) {
  std::vector<int32_t> p(static_cast<size_t>(length));
  for (int i = 0; i < length; ++i) p[size_t(i)] = (i * 37 + request * 11 + 5) % vocab_mod;
  return p;
}

// Runs `requests` (indices into mix.prompt_lengths); request i is added before step arrive[i].
inline std::vector<Output> run(ModelRunner& runner, const SchedulerLimits& limits, const Mix& mix,
                               const std::vector<int>& requests, const std::vector<int>& arrive) {
  Scheduler s(runner, limits);
  std::vector<Output> out(mix.prompt_lengths.size());
  size_t added = 0;
  auto add_due = [&](int step) {
    for (; added < requests.size() && arrive[added] <= step; ++added) {
      const int i = requests[added];
      GenerationRequest r;
      r.prompt = prompt(i, mix.prompt_lengths[size_t(i)], mix.vocab_mod);
      r.sampling.temperature = 0.0f;
      r.sampling.max_tokens = mix.max_tokens;
      r.sampling.ignore_eos = true;
      r.sampling.logprobs = mix.logprobs;
      r.sampling.top_logprobs = mix.logprobs ? 5 : 0;
      r.on_event = [&out, i](const RequestEvent& e) {
        for (const auto& t : e.tokens) out[size_t(i)].tokens.push_back(t);
      };
      s.add(std::make_shared<RequestHandle>(uint64_t(i + 1)), std::move(r));
    }
  };
  for (int step = 0; step < 100000; ++step) {
    add_due(step);
    if (added == requests.size() && s.idle()) break;
    s.step();
  }
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.blocks().num_free(), runner.cache_geometry().num_blocks);
  return out;
}

inline bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

// Fails the test with the first difference of every request.
inline void expect_equal(const std::vector<Output>& alone, const std::vector<Output>& mixed,
                         const std::string& what) {
  for (size_t i = 0; i < alone.size(); ++i) {
    const auto& a = alone[i].tokens;
    const auto& b = mixed[i].tokens;
    ASSERT_EQ(a.size(), b.size()) << what << ": request " << i << " token count";
    for (size_t t = 0; t < a.size(); ++t) {
      EXPECT_EQ(a[t].id, b[t].id) << what << ": request " << i << " token " << t;
      EXPECT_TRUE(same_bits(a[t].logprob, b[t].logprob))
          << what << ": request " << i << " token " << t << " logprob " << a[t].logprob << " vs "
          << b[t].logprob;
      bool top_equal = a[t].top_logprobs.size() == b[t].top_logprobs.size();
      for (size_t j = 0; top_equal && j < a[t].top_logprobs.size(); ++j)
        top_equal = a[t].top_logprobs[j].first == b[t].top_logprobs[j].first &&
                    same_bits(a[t].top_logprobs[j].second, b[t].top_logprobs[j].second);
      EXPECT_TRUE(top_equal) << what << ": request " << i << " token " << t << " top logprobs";
      if (a[t].id != b[t].id) break;  // later tokens differ as a consequence
    }
  }
}

// Alone under `alone_limits` (each request by itself), then together under `mixed_limits`,
// once all at step 0 and once arriving every `stagger` steps in reverse order.
inline void check(ModelRunner& runner, const SchedulerLimits& alone_limits,
                  const SchedulerLimits& mixed_limits, const Mix& mix, int stagger) {
  const int n = int(mix.prompt_lengths.size());
  std::vector<Output> alone(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    alone[size_t(i)] = run(runner, alone_limits, mix, {i}, {0})[size_t(i)];
  std::vector<int> all, at_once(size_t(n), 0), reversed, staggered;
  for (int i = 0; i < n; ++i) {
    all.push_back(i);
    reversed.push_back(n - 1 - i);
    staggered.push_back(i * stagger);
  }
  expect_equal(alone, run(runner, mixed_limits, mix, all, at_once), "all at once");
  expect_equal(alone, run(runner, mixed_limits, mix, reversed, staggered), "staggered");
}

}  // namespace sparkglm::invariance
