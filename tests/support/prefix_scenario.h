#pragma once
// Prefix-cache restores against cold prefills, for any ModelRunner with KDA snapshots: a
// multi-turn conversation (turn 2 resends turn 1, its answer and a new message) and replays of
// both turns, each compared bit for bit (token ids, logprobs, top logprobs) with the same request
// prefilled from position 0 by a scheduler without a cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model_runner.h"
#include "engine/runtime/prefix_cache.h"
#include "engine/runtime/scheduler.h"

namespace sparkglm::prefix_scenario {

struct Outcome {
  std::vector<GeneratedToken> tokens;
  int cached_tokens = -1;  // from the final event
};

inline std::vector<int32_t> tokens_of(int n, int seed, int vocab_mod = 256) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = (i * 37 + seed * 11 + 5) % vocab_mod;
  return t;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline GenerationRequest request(std::vector<int32_t> prompt, bool logprobs,
                                 const std::string& salt = "", int max_tokens = 6) {
  GenerationRequest r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = logprobs;
  r.sampling.top_logprobs = logprobs ? 5 : 0;
  r.cache_salt = salt;
  return r;
}

inline bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

inline void expect_bitwise(const Outcome& cold, const Outcome& warm, const std::string& what) {
  ASSERT_EQ(cold.tokens.size(), warm.tokens.size()) << what;
  for (size_t t = 0; t < cold.tokens.size(); ++t) {
    const auto &a = cold.tokens[t], &b = warm.tokens[t];
    EXPECT_EQ(a.id, b.id) << what << ": token " << t;
    EXPECT_TRUE(same_bits(a.logprob, b.logprob))
        << what << ": token " << t << " logprob " << a.logprob << " vs " << b.logprob;
    bool top = a.top_logprobs.size() == b.top_logprobs.size();
    for (size_t j = 0; top && j < a.top_logprobs.size(); ++j)
      top = a.top_logprobs[j].first == b.top_logprobs[j].first &&
            same_bits(a.top_logprobs[j].second, b.top_logprobs[j].second);
    EXPECT_TRUE(top) << what << ": token " << t << " top logprobs";
    if (a.id != b.id) return;  // later tokens differ as a consequence
  }
}

// Adds every request at once and steps until all finish; every block must come back.
inline std::vector<Outcome> run(Scheduler& s, std::vector<GenerationRequest> requests) {
  std::vector<Outcome> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].on_event = [&out, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) out[i].tokens.push_back(t);
      if (e.finish != FinishReason::kNone) out[i].cached_tokens = e.cached_tokens;
    };
    s.add(std::make_shared<RequestHandle>(i + 1), std::move(requests[i]));
  }
  for (int guard = 0; !s.idle() && guard < 100000; ++guard) s.step();
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.blocks().num_free(), s.blocks().num_blocks()) << "a block leaked";
  return out;
}

inline Outcome cold(ModelRunner& runner, SchedulerLimits limits, const GenerationRequest& r) {
  limits.prefix_caching = false;
  Scheduler s(runner, limits);
  return run(s, {r})[0];
}

// Turn 1 (turn1_len tokens), then turn 2 = turn 1 + its answer + new_len tokens, then a replay of
// each, through one caching scheduler; every answer equals the cold one and each hit is the
// prompt's last grid point before its final token, but turn 2's: it reaches the last grid point
// of turn 1's prompt and answer where that lies further (the answer sequence, prefix_cache.h).
// The cold answers are computed first: a cold scheduler on the same runner would write into
// blocks the caching one has published.
inline void multi_turn_equals_cold(ModelRunner& runner, const SchedulerLimits& limits,
                                   int turn1_len, int new_len, bool logprobs, int vocab_mod) {
  ASSERT_TRUE(limits.prefix_caching);
  const auto turn1 = tokens_of(turn1_len, 1, vocab_mod);
  const Outcome cold1 = cold(runner, limits, request(turn1, logprobs));
  std::vector<int32_t> answer;
  for (const auto& t : cold1.tokens) answer.push_back(t.id);
  const auto turn2 = concat(concat(turn1, answer), tokens_of(new_len, 2, vocab_mod));
  const Outcome cold2 = cold(runner, limits, request(turn2, logprobs));

  Scheduler s(runner, limits);
  const int grid = s.prefix_cache()->grid();
  const Outcome first = run(s, {request(turn1, logprobs)})[0];
  EXPECT_EQ(first.cached_tokens, 0);
  expect_bitwise(cold1, first, "turn 1");
  const Outcome second = run(s, {request(turn2, logprobs)})[0];
  const int answered = (turn1_len + int(answer.size())) / grid * grid;
  EXPECT_EQ(second.cached_tokens, std::max((turn1_len - 1) / grid * grid, answered))
      << "turn 1's prompt end, or its answer's last grid point";
  expect_bitwise(cold2, second, "turn 2");
  const Outcome replay1 = run(s, {request(turn1, logprobs)})[0];
  EXPECT_EQ(replay1.cached_tokens, (turn1_len - 1) / grid * grid);
  expect_bitwise(cold1, replay1, "turn 1 replayed");
  const Outcome replay2 = run(s, {request(turn2, logprobs)})[0];
  EXPECT_EQ(replay2.cached_tokens, (int(turn2.size()) - 1) / grid * grid);
  expect_bitwise(cold2, replay2, "turn 2 replayed");
  EXPECT_EQ(s.counters().prefix_hits, 3u);
}

}  // namespace sparkglm::prefix_scenario
