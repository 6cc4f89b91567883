// The ranks in lockstep: rank 0's RankLeader sends each call to a follower that replays it (the
// greedy tokens equal one rank's), the step message refuses malformed bytes, a rank that is gone
// makes a collective throw instead of hanging, and the bootstrap refuses a rank whose settings
// differ, naming the setting.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "engine/backend/cpu/cpu_model_runner.h"
#include "engine/core/error.h"
#include "engine/dist/rank_bootstrap.h"
#include "engine/dist/rank_fingerprint.h"
#include "engine/dist/rank_follower.h"
#include "engine/dist/rank_leader.h"
#include "engine/dist/step_message.h"
#include "engine/dist/vocab_parallel.h"
#include "engine/runtime/block_allocator.h"
#include "tests/support/micro_model.h"

namespace sparkglm {
namespace {

using dist::SocketCommunicator;

// Greedy decode of one prompt through submit / collect: the tokens, then the last step's final
// hidden state ([D], what an MTP drafter reads).
std::vector<int32_t> decode(ModelRunner& runner, int steps, std::vector<float>* hidden = nullptr) {
  BlockAllocator blocks(32);
  std::vector<int32_t> table;
  const std::vector<int32_t> prompt = {72, 101, 108, 108, 111, 33, 10};
  blocks.ensure_capacity(table, int(prompt.size()) + steps, 16);
  std::vector<int32_t> tokens;
  ForwardBatch batch;
  batch.add_sequence(prompt, 0, 0, table);
  StepSampling sampling;
  sampling.picked = {1};
  sampling.draws = {RowDraw{}};
  for (int k = 0; k < steps; ++k) {
    runner.submit(batch, sampling);
    StepResult result;
    runner.collect(result);
    tokens.push_back(result.tokens[0]);
    if (hidden) *hidden = result.hidden;
    batch = ForwardBatch();
    batch.add_sequence({result.tokens[0]}, int(prompt.size()) + k, 0, table);
  }
  return tokens;
}

cpu::CpuRunnerOptions options(dist::Communicator* comm) {
  cpu::CpuRunnerOptions o;
  o.num_blocks = 32;
  o.comm = comm;
  return o;
}

TEST(RankLockstep, AFollowerReplaysRankZerosCallsAndTheTokensEqualOneRanks) {
  const LoadedModel& m = testing::micro_model();
  ThreadPool one(1);
  cpu::CpuModelRunner single(m.config, m.weights, options(nullptr), one);
  std::vector<float> expected_hidden, hidden;
  const std::vector<int32_t> expected = decode(single, 10, &expected_hidden);

  auto group = SocketCommunicator::local_group(2);
  int64_t replayed = -1;
  std::thread follower([&] {
    ThreadPool pool(1);
    cpu::CpuModelRunner runner(m.config, m.weights, options(group[1].get()), pool);
    replayed = dist::follow_rank0(runner, *group[1]);
  });
  {
    ThreadPool pool(1);
    dist::RankLeader leader(
        std::make_unique<cpu::CpuModelRunner>(m.config, m.weights, options(group[0].get()), pool),
        *group[0]);
    EXPECT_EQ(decode(leader, 10, &hidden), expected);
    ASSERT_EQ(hidden.size(), size_t(m.config.hidden_size));
    for (size_t i = 0; i < hidden.size(); ++i)
      EXPECT_NEAR(hidden[i], expected_hidden[i], 1e-4 * (1 + std::fabs(expected_hidden[i]))) << i;
    // A bad batch fails on rank 0 alone, before it is sent: the ranks stay in step.
    ForwardBatch bad;
    bad.add_sequence({1, 2}, 0, /*state_slot=*/99, {0});
    ForwardOutput out;
    EXPECT_THROW(leader.forward(bad, out), Error);
    EXPECT_EQ(decode(leader, 10), expected);
  }  // ~RankLeader tells the follower to stop
  follower.join();
  EXPECT_EQ(replayed, 40);  // two decodes of 10 steps, a submit and a collect each
}

TEST(RankLockstep, TheStepMessageRoundTripsAndRefusesMalformedBytes) {
  dist::StepMessage m;
  m.call = dist::StepCall::kSubmit;
  m.batch.add_sequence({5, 6, 7}, 4, 1, {3, 9});
  m.batch.seqs[0].restore_snapshot = 2;
  m.batch.seqs[0].record_states = true;
  m.batch.seqs[0].record_before_row = 2;  // each its own field (the runner refuses both)
  m.batch.seqs[0].resume_record = 1;
  m.sampling.picked = {1};
  m.sampling.draws = {RowDraw{0.0f, 1.0f, 0.0f, 0, 42, 3}};
  m.sampling.token_from = {-1, -1, 0};
  m.sampling.mask_row = {0};
  m.sampling.mask_words = 10;
  const std::vector<uint8_t> bytes = dist::encode_step(m);
  const dist::StepMessage back = dist::decode_step(bytes);
  EXPECT_EQ(back.batch.tokens, m.batch.tokens);
  EXPECT_EQ(back.batch.positions, m.batch.positions);
  EXPECT_EQ(back.batch.seqs[0].block_table, m.batch.seqs[0].block_table);
  EXPECT_EQ(back.batch.seqs[0].restore_snapshot, 2);
  EXPECT_TRUE(back.batch.seqs[0].record_states);
  EXPECT_EQ(back.batch.seqs[0].record_before_row, 2);
  EXPECT_EQ(back.batch.seqs[0].resume_record, 1);
  EXPECT_EQ(back.sampling.draws[0].seed, 42u);
  EXPECT_EQ(back.sampling.token_from, m.sampling.token_from);
  EXPECT_EQ(back.sampling.mask_words, 10);
  for (size_t cut : {size_t(0), size_t(1), bytes.size() / 2, bytes.size() - 1})
    EXPECT_THROW(dist::decode_step({bytes.data(), cut}), Error) << cut;
  std::vector<uint8_t> huge = bytes;
  huge[1] = 0xff;  // the token count's low byte: far past the message's end
  huge[8] = 0x7f;
  EXPECT_THROW(dist::decode_step(huge), Error);
  EXPECT_THROW(dist::decode_step(std::vector<uint8_t>{9}), Error);  // unknown call
}

TEST(RankLockstep, ARankThatIsGoneMakesTheCollectiveThrowInsteadOfHanging) {
  auto group = SocketCommunicator::local_group(2);
  group[1].reset();  // its socket closes, as when its process dies
  EXPECT_TRUE(group[0]->peer_lost());
  std::vector<float> x(16, 1.0f);
  try {
    group[0]->all_reduce_sum(x.data(), x.size());
    FAIL() << "all_reduce_sum returned with rank 1 gone";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDeviceFatal);
    EXPECT_NE(std::string(e.what()).find("rank 1 is gone"), std::string::npos) << e.what();
  }
}

TEST(RankLockstep, TheGreedyPickAcrossShardsIsTheLowestIdAmongTheMaxima) {
  auto group = SocketCommunicator::local_group(2);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  // Three rows of vocabulary 8, split 4 + 4: a tie across the shards, a maximum on rank 1 only
  // (with a NaN on rank 0), and a row with no usable logit.
  const std::vector<float> rows[2] = {{1, 5, 2, 5, /**/ nan, 0, 1, 2, /**/ -inf, -inf, nan, -inf},
                                      {5, 0, 5, 1, /**/ 3, 7, 7, 0, /**/ -inf, nan, -inf, -inf}};
  std::vector<int32_t> picks[2];
  std::thread other([&] { picks[1] = dist::greedy_picks(*group[1], rows[1].data(), 3, 4); });
  picks[0] = dist::greedy_picks(*group[0], rows[0].data(), 3, 4);
  other.join();
  EXPECT_EQ(picks[0], (std::vector<int32_t>{1, 5, -1}));
  EXPECT_EQ(picks[1], picks[0]);
}

TEST(RankLockstep, TheBootstrapRefusesARankWhoseSettingsDifferNamingTheSetting) {
  const nlohmann::json mine = {{"binary_sha256", "b"},
                               {"profile_sha256", ""},
                               {"precision_mode", "strict"},
                               {"settings", {{"max-num-seqs", 4}, {"seed", 1}}}};
  nlohmann::json theirs = mine;
  theirs["settings"]["max-num-seqs"] = 2;
  const int fd = dist::listen_for_ranks("127.0.0.1", 0);
  dist::RankAddress a{2, 0, "127.0.0.1", dist::listening_port(fd), 30};
  std::string refused_there;
  std::thread rank1([&] {
    dist::RankAddress b = a;
    b.rank = 1;
    try {
      dist::join_ranks(b, theirs);
    } catch (const Error& e) {
      refused_there = e.what();
    }
  });
  try {
    dist::join_ranks(a, mine, fd);
    ADD_FAILURE() << "rank 0 accepted a rank with other settings";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 differs from rank 0 in settings.max-num-seqs: 2 "
                                         "there, 4 on rank 0"),
              std::string::npos)
        << e.what();
  }
  rank1.join();
  EXPECT_NE(refused_there.find("rank 0 refused this rank: rank 1 differs"), std::string::npos)
      << refused_there;
  EXPECT_EQ(dist::fingerprint_difference(mine, mine, 1), "");
}

// Anyone can reach rank 0's port: a fingerprint nested deeper than a fingerprint nests is refused
// by name before anything walks it.
TEST(RankLockstep, AFingerprintNestedTooDeepIsRefusedBeforeItIsWalked) {
  const nlohmann::json mine = {{"binary_sha256", "b"}, {"settings", {{"seed", 1}}}};
  nlohmann::json deep = 1;
  for (int i = 0; i < 50; ++i) deep = nlohmann::json::array({deep});
  const nlohmann::json theirs = {{"binary_sha256", deep}, {"settings", {{"seed", 1}}}};
  const int fd = dist::listen_for_ranks("127.0.0.1", 0);
  dist::RankAddress a{2, 0, "127.0.0.1", dist::listening_port(fd), 30};
  std::thread rank1([&] {
    dist::RankAddress b = a;
    b.rank = 1;
    try {
      dist::join_ranks(b, theirs);
    } catch (const Error&) {  // refused, as it should be
    }
  });
  try {
    dist::join_ranks(a, mine, fd);
    ADD_FAILURE() << "rank 0 accepted a fingerprint nested 51 levels deep";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1's fingerprint: JSON nested deeper than 8 levels"),
              std::string::npos)
        << e.what();
  }
  rank1.join();
}

// A TP group runs one precision mode (spark now runs on cuda as well as cpu): a rank in the other
// mode is named as the difference.
TEST(RankLockstep, ARankInAnotherPrecisionModeIsNamed) {
  const nlohmann::json mine = {{"binary_sha256", "b"},
                               {"profile_sha256", ""},
                               {"precision_mode", "strict"},
                               {"settings", {{"precision-mode", "strict"}}}};
  nlohmann::json theirs = mine;
  theirs["precision_mode"] = "spark";
  EXPECT_EQ(dist::fingerprint_difference(mine, theirs, 1),
            "rank 1 differs from rank 0 in precision_mode: \"spark\" there, \"strict\" on rank 0");
}

}  // namespace
}  // namespace sparkglm
