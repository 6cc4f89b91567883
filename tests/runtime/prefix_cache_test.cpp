// The prefix cache through the scheduler on the CPU reference (tinyglm-micro, dummy weights): a
// hit gives exactly what a cold prefill gives (token ids, logprobs and top logprobs, bit for bit),
// a salt separates, a shared block is not rewritten by another request's prefill, eviction under
// pool pressure keeps every block accounted for, and a prefix without a snapshot is a shorter hit.
#include "engine/runtime/prefix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/runtime/scheduler.h"
#include "tests/support/micro_model.h"
#include "tests/support/prefix_scenario.h"

namespace sparkglm {
namespace {

using namespace prefix_scenario;  // NOLINT: the scenario's vocabulary

class PrefixCacheTest : public ::testing::Test {
 protected:
  ThreadPool pool{2};
  const LoadedModel& m = testing::micro_model();

  std::unique_ptr<cpu::CpuModelRunner> runner(int blocks, int snapshots = 8) {
    cpu::CpuRunnerOptions o;
    o.num_blocks = blocks;
    o.block_size = 16;
    o.num_state_slots = 4;
    o.num_snapshots = snapshots;
    return std::make_unique<cpu::CpuModelRunner>(m.config, m.weights, o, pool);
  }
  static SchedulerLimits limits(bool caching, int every = 0) {
    SchedulerLimits l;
    l.max_seq_len = 1024;
    l.max_prefill_tokens = 512;
    l.prefix_caching = caching;
    l.snapshot_every_chunks = every;
    l.cache_identity = PrefixCache::identity("tinyglm-micro", "f32");
    return l;
  }
  // The cold reference runs on a runner of its own: on the caching scheduler's runner it would
  // write into blocks that scheduler has published.
  Outcome cold(const GenerationRequest& req) {
    if (!cold_runner_) cold_runner_ = runner(256, 0);
    return prefix_scenario::cold(*cold_runner_, limits(false), req);
  }
  std::unique_ptr<cpu::CpuModelRunner> cold_runner_;
};

TEST_F(PrefixCacheTest, HitEqualsColdPrefillBitwiseForReplayAndNextTurn) {
  auto r = runner(256);
  // Host sampling with logprobs, then pipelined greedy picks; 330 tokens reach the sparse indexer.
  for (bool logprobs : {true, false})
    multi_turn_equals_cold(*r, limits(true), 150, 70, logprobs, 256);
  multi_turn_equals_cold(*r, limits(true), 330, 9, true, 256);
}

TEST_F(PrefixCacheTest, HitEqualsColdUnderASmallPrefillBudgetAndBf16Latents) {
  cpu::CpuRunnerOptions o;
  o.num_blocks = 256;
  o.num_snapshots = 4;
  o.kv_dtype = KvDtype::kBF16;
  cpu::CpuModelRunner bf16(m.config, m.weights, o, pool);
  SchedulerLimits l = limits(true);
  l.max_prefill_tokens = 64;  // every prompt is cut at every chunk
  multi_turn_equals_cold(bf16, l, 200, 50, true, 256);
}

TEST_F(PrefixCacheTest, TheNextTurnHitsThroughTheAnswer) {
  // Turn 1: a 150-token prompt and a 120-token answer, whose rows decode computed (not
  // published). The answer sequence prefills the conversation from the prompt's snapshot (128) to
  // its last grid point (270 tokens: 256) once turn 1 has finished, so turn 2 (turn 1, its answer
  // and 40 new tokens) hits 256, not 128, and still equals its cold prefill.
  auto r = runner(256);
  const auto turn1 = tokens_of(150, 50);
  const Outcome cold1 = cold(request(turn1, true, "", 120));
  std::vector<int32_t> answer;
  for (const auto& t : cold1.tokens) answer.push_back(t.id);
  const auto turn2 = concat(concat(turn1, answer), tokens_of(40, 51));
  const Outcome cold2 = cold(request(turn2, true));

  Scheduler s(*r, limits(true));
  expect_bitwise(cold1, run(s, {request(turn1, true, "", 120)})[0], "turn 1");
  EXPECT_EQ(s.counters().prefix.answers, 1u);
  EXPECT_EQ(s.counters().prefix.answer_tokens, 128u) << "tokens 128..256";
  EXPECT_EQ(s.counters().prompt_tokens, 150u) << "an answer's prefill is not a prompt's";
  const Outcome second = run(s, {request(turn2, true)})[0];
  EXPECT_EQ(second.cached_tokens, 256) << "turn 1's prompt and answer up to the last grid point";
  expect_bitwise(cold2, second, "turn 2");
  EXPECT_EQ(s.counters().prefix_hits, 1u) << "an answer sequence's own hit is not counted";
}

TEST_F(PrefixCacheTest, AnAnswerRunsOnlyWhileNoRequestDoes) {
  // Turn 1 finishes and leaves its answer sequence; another request arrives at once. The answer
  // waits until that request has finished (it must not slow it down), then publishes turn 1's
  // answer all the same.
  auto r = runner(256);
  Scheduler s(*r, limits(true));
  bool turn1_done = false;
  GenerationRequest turn1 = request(tokens_of(150, 52), false, "", 120);
  turn1.on_event = [&](const RequestEvent& e) { turn1_done |= e.finish != FinishReason::kNone; };
  s.add(std::make_shared<RequestHandle>(1), std::move(turn1));
  for (int guard = 0; !turn1_done && guard < 10000; ++guard) s.step();
  ASSERT_TRUE(turn1_done);
  bool other_done = false;
  GenerationRequest other = request(tokens_of(100, 53), false, "", 20);  // no answer of its own
  other.on_event = [&](const RequestEvent& e) { other_done |= e.finish != FinishReason::kNone; };
  s.add(std::make_shared<RequestHandle>(2), std::move(other));
  for (int guard = 0; !other_done && guard < 10000; ++guard) {
    s.step();
    EXPECT_EQ(s.counters().prefix.answers, 0u) << "an answer ran beside a request";
  }
  for (int guard = 0; !s.idle() && guard < 10000; ++guard) s.step();
  EXPECT_EQ(s.counters().prefix.answers, 1u);
  EXPECT_EQ(s.counters().prefix.answer_tokens, 128u);
}

TEST_F(PrefixCacheTest, ADifferentSaltNeverMatches) {
  auto r = runner(256);
  Scheduler s(*r, limits(true));
  const auto prompt = tokens_of(140, 3);
  run(s, {request(prompt, true, "tenant-a")});
  const Outcome other = run(s, {request(prompt, true, "tenant-b")})[0];
  EXPECT_EQ(other.cached_tokens, 0) << "a salt must not see another salt's blocks";
  EXPECT_EQ(s.counters().prefix_hits, 0u);
  const Outcome same = run(s, {request(prompt, true, "tenant-a")})[0];
  EXPECT_EQ(same.cached_tokens, 128);
  expect_bitwise(other, same, "salted replay");
  // The model and precision identity seed the keys the same way.
  SchedulerLimits bf16 = limits(true);
  bf16.cache_identity = PrefixCache::identity("tinyglm-micro", "bf16");
  EXPECT_NE(bf16.cache_identity, limits(true).cache_identity);
}

TEST_F(PrefixCacheTest, SharedBlocksAreNotRewrittenByConcurrentPrefills) {
  auto r = runner(256);
  Scheduler s(*r, limits(true));
  const auto system = tokens_of(200, 4);
  run(s, {request(system, true)});  // publishes 12 blocks and a snapshot at 192
  // Every cached block's latents, indexer keys and gates as the first request left them.
  const LatentCache& cache = r->latent_cache();
  std::vector<int32_t> prefix_blocks;
  for (int32_t b = 0; b < s.blocks().num_blocks(); ++b)
    if (s.blocks().cached(b)) prefix_blocks.push_back(b);
  auto contents = [&] {
    std::vector<float> all, row(size_t(std::max(cache.latent_dim(), cache.index_dim())));
    for (int32_t b : prefix_blocks) {
      const std::vector<int32_t> table = {b};
      for (int layer = 0; layer < cache.num_layers(); ++layer)
        for (int64_t p = 0; p < cache.block_size(); ++p) {
          cache.load_latent(layer, table, p, row.data());
          all.insert(all.end(), row.begin(), row.begin() + cache.latent_dim());
          cache.load_index_key(layer, table, p, row.data());
          all.insert(all.end(), row.begin(), row.begin() + cache.index_dim());
          all.push_back(cache.index_gate_at(layer, table, p));
        }
    }
    return all;
  };
  ASSERT_EQ(prefix_blocks.size(), 12u);
  const std::vector<float> before = contents();
  // Two requests share the prefix and prefill their own tails in the same steps.
  const std::vector<GenerationRequest> both = {request(concat(system, tokens_of(90, 5)), true),
                                               request(concat(system, tokens_of(75, 6)), true)};
  std::vector<Outcome> out(2);
  for (size_t i = 0; i < 2; ++i) {
    GenerationRequest q = both[i];
    q.on_event = [&out, i](const RequestEvent& e) {
      for (const auto& t : e.tokens) out[i].tokens.push_back(t);
      if (e.finish != FinishReason::kNone) out[i].cached_tokens = e.cached_tokens;
    };
    s.add(std::make_shared<RequestHandle>(10 + i), std::move(q));
  }
  int shared = 0;
  for (int guard = 0; !s.idle() && guard < 1000; ++guard) {
    s.step();
    int now = 0;
    for (int32_t b = 0; b < s.blocks().num_blocks(); ++b)
      now += s.blocks().ref_count(b) == 2 && s.blocks().cached(b);
    shared = std::max(shared, now);
  }
  EXPECT_EQ(shared, 12) << "both requests hold the 12 prefix blocks at once";
  EXPECT_EQ(out[0].cached_tokens, 192);
  EXPECT_EQ(out[1].cached_tokens, 192);
  for (size_t i = 0; i < 2; ++i) expect_bitwise(cold(both[i]), out[i], "sharer");
  // The first request's 12 blocks are byte for byte as it wrote them.
  const std::vector<float> after = contents();
  ASSERT_EQ(after.size(), before.size());
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)))
      << "a shared block was rewritten";
}

TEST_F(PrefixCacheTest, EvictionUnderPoolPressureReusesCachedBlocks) {
  auto r = runner(24);  // 384 tokens: two prompts cannot both stay cached
  Scheduler s(*r, limits(true));
  const auto a = tokens_of(150, 8), b = tokens_of(300, 9);
  run(s, {request(a, true)});
  EXPECT_GT(s.blocks().num_idle_cached(), 0);
  const Outcome ob = run(s, {request(b, true)})[0];
  EXPECT_GT(s.counters().block_evictions, 0u) << "b needed the blocks a left cached";
  expect_bitwise(cold(request(b, true)), ob, "after eviction");
  // a's blocks went first (least recently released): a starts cold again, and is still right.
  const Outcome oa = run(s, {request(a, true)})[0];
  EXPECT_EQ(oa.cached_tokens, 0);
  expect_bitwise(cold(request(a, true)), oa, "a again");
}

TEST_F(PrefixCacheTest, APrefixWithoutSnapshotGivesAShorterHit) {
  auto r = runner(256);
  const auto base = tokens_of(300, 10);
  const std::vector<int32_t> head(base.begin(), base.begin() + 200);
  const auto branch1 = concat(head, tokens_of(60, 11)), branch2 = concat(head, tokens_of(70, 12));
  {
    // Only the end of the prompt (256) has a snapshot: 192 tokens of blocks match, no snapshot
    // lies on the shared path, so the hit is 0; the branch point (192) is saved for the next.
    Scheduler s(*r, limits(true, 0));
    run(s, {request(base, true)});
    const Outcome o1 = run(s, {request(branch1, true)})[0];
    EXPECT_EQ(o1.cached_tokens, 0);
    expect_bitwise(cold(request(branch1, true)), o1, "branch 1");
    const Outcome o2 = run(s, {request(branch2, true)})[0];
    EXPECT_EQ(o2.cached_tokens, 192) << "the branch point's snapshot";
    expect_bitwise(cold(request(branch2, true)), o2, "branch 2");
  }
  {
    // Snapshots every chunk: the same branch hits at once.
    Scheduler s(*r, limits(true, 1));
    run(s, {request(base, true)});
    const Outcome o1 = run(s, {request(branch1, true)})[0];
    EXPECT_EQ(o1.cached_tokens, 192);
    expect_bitwise(cold(request(branch1, true)), o1, "branch 1, every chunk");
  }
}

TEST_F(PrefixCacheTest, SnapshotsAreBoundedAndLeastRecentlyUsedGoesFirst) {
  auto r = runner(256, 2);
  Scheduler s(*r, limits(true));
  const auto a = tokens_of(100, 13), b = tokens_of(100, 14), c = tokens_of(100, 15);
  run(s, {request(a, true)});
  run(s, {request(b, true)});
  EXPECT_EQ(run(s, {request(a, true)})[0].cached_tokens, 64);  // a is now the most recent
  run(s, {request(c, true)});                                  // evicts b's snapshot
  EXPECT_EQ(s.counters().snapshot_evictions, 1u);
  EXPECT_EQ(run(s, {request(b, true)})[0].cached_tokens, 0);
  EXPECT_EQ(run(s, {request(c, true)})[0].cached_tokens, 64);
}

TEST_F(PrefixCacheTest, AnIdleConversationKeepsItsSnapshotWhileAnotherRunsManyTurns) {
  // Four snapshot slots. Conversation A has one turn (prompt end 64, answer 128) and idles while
  // conversation B runs six turns of 128 tokens each (a 64-token answer and 64 new tokens), each
  // saving a snapshot at its prompt's end and one at its answer's: twelve. B's earlier ones are
  // superseded by its later ones and go first, so A's answer snapshot survives and A's next turn
  // hits through it, equal to its cold prefill. (Least recently used alone evicts A's: a hit of 0.)
  auto r = runner(512, 4);
  Scheduler s(*r, limits(true));
  const auto next_turn = [&](const std::vector<int32_t>& prompt, int max_tokens, int fresh,
                             int seed) {
    const Outcome o = run(s, {request(prompt, true, "", max_tokens)})[0];
    std::vector<int32_t> answer;
    for (const auto& t : o.tokens) answer.push_back(t.id);
    return concat(concat(prompt, answer), tokens_of(fresh, seed));
  };
  const auto a2 = next_turn(tokens_of(100, 61), 60, 30, 62);
  auto b = tokens_of(100, 63);
  for (int turn = 0; turn < 6; ++turn) b = next_turn(b, 64, 64, 64 + turn);
  EXPECT_GE(s.counters().snapshot_evictions, 10u);
  const Outcome resumed = run(s, {request(a2, true)})[0];
  EXPECT_EQ(resumed.cached_tokens, 128) << "A's answer snapshot (160 tokens: grid point 128)";
  expect_bitwise(cold(request(a2, true)), resumed, "A's second turn");
}

TEST_F(PrefixCacheTest, PreemptionAndCancellationUnderSharingLoseNoBlockAndNoRequest) {
  // Six requests on two shared prefixes in a pool too small for all of them to grow: the newest
  // are preempted (their shared blocks go back to the cache, their pinned snapshots unpinned) and
  // recomputed, one is cancelled while it holds shared blocks; every other request completes and
  // every block and snapshot pin comes back.
  auto r = runner(40, 4);
  SchedulerLimits l = limits(true);
  l.reserve_output_tokens = 16;
  Scheduler s(*r, l);
  const auto p0 = tokens_of(140, 20), p1 = tokens_of(140, 21);
  run(s, {request(p0, false), request(p1, false)});  // publish both prefixes
  std::vector<int> lengths(6, 0);
  std::vector<FinishReason> finish(6, FinishReason::kNone);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 6; ++i) {
    GenerationRequest q =
        request(concat(i % 2 ? p1 : p0, tokens_of(20 + i, 30 + i)), false, "", 120);
    q.on_event = [&, i](const RequestEvent& e) {
      lengths[size_t(i)] += int(e.tokens.size());
      if (e.finish != FinishReason::kNone) finish[size_t(i)] = e.finish;
    };
    handles.push_back(std::make_shared<RequestHandle>(100 + i));
    s.add(handles.back(), std::move(q));
  }
  for (int guard = 0; !s.idle() && guard < 20000; ++guard) {
    s.step();
    if (guard == 3) handles[5]->cancel();
  }
  ASSERT_TRUE(s.idle()) << "the scheduler stopped making progress";
  EXPECT_GT(s.counters().preemptions, 0u) << "the pool was meant to run dry";
  EXPECT_GT(s.counters().prefix_hits, 0u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(finish[size_t(i)], FinishReason::kLength) << "request " << i;
    EXPECT_EQ(lengths[size_t(i)], 120) << "request " << i;
  }
  EXPECT_EQ(finish[5], FinishReason::kCancelled);
  EXPECT_EQ(s.blocks().num_free(), s.blocks().num_blocks()) << "a block leaked";
  EXPECT_EQ(s.prefix_cache()->snapshots_pinned(), 0) << "a snapshot pin leaked";
}

TEST_F(PrefixCacheTest, CachingNeedsSnapshotsInTheRunner) {
  auto r = runner(64, 0);
  EXPECT_THROW(Scheduler s(*r, limits(true)), Error);
}

}  // namespace
}  // namespace sparkglm
