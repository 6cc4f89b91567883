// --speculative-tokens fills the scheduler's drafts and the runner's KDA state records (k + 1
// rows per slot, or 1 with --speculative-rollback recompute, which the effective config echoes)
// and sizes the runner's step for verify slices (k + 1 rows per sequence, 2k + 1 with recompute);
// it runs with --device cuda and is refused at start, naming the flag, where the verify step does
// not run yet: several ranks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/options/serving_config.h"
#include "engine/runtime/speculation/speculative_rollback.h"

namespace sparkglm {
namespace {

ServingConfig fill(const std::vector<std::string>& args) {
  const OptionRegistry& registry = serving_options();
  return fill_serving_config(
      EffectiveConfig::resolve(registry, nullptr, parse_command_line(args, registry)));
}

std::string refusal(const std::vector<std::string>& args) {
  try {
    fill(args);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(SpeculationOptions, OffByDefaultAndKPlusOneStateRecordsWhenOn) {
  const ServingConfig off = fill({});
  EXPECT_EQ(off.scheduler.speculative_tokens, 0);
  EXPECT_EQ(off.runner.state_records, 0);
  const ServingConfig on = fill({"--speculative-tokens", "3"});
  EXPECT_EQ(on.scheduler.speculative_tokens, 3);
  EXPECT_EQ(on.runner.state_records, 4);
}

TEST(SpeculationOptions, RollbackByRecomputeNeedsOneStateRecordAndIsEchoed) {
  const OptionRegistry& registry = serving_options();
  EXPECT_EQ(fill({"--speculative-tokens", "3"}).scheduler.speculative_rollback,
            SpeculativeRollback::kRecords);  // the default
  const std::vector<std::string> args = {"--speculative-tokens", "3", "--speculative-rollback",
                                         "recompute"};
  const EffectiveConfig effective =
      EffectiveConfig::resolve(registry, nullptr, parse_command_line(args, registry));
  EXPECT_EQ(effective.to_json().at("speculative-rollback"), "recompute");
  const ServingConfig on = fill_serving_config(effective);
  EXPECT_EQ(on.scheduler.speculative_rollback, SpeculativeRollback::kRecompute);
  EXPECT_EQ(on.runner.state_records, 1);
  EXPECT_EQ(fill({"--speculative-rollback", "recompute"}).runner.state_records, 0);  // k = 0
  try {
    fill({"--speculative-tokens", "1", "--speculative-rollback", "replay"});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("speculative-rollback"), std::string::npos) << e.what();
  }
}

TEST(SpeculationOptions, VerifySlicesSizeTheStepAndCudaIsAccepted) {
  const ServingConfig plain = fill({"--max-prefill-tokens", "256", "--max-batch-size", "4"});
  EXPECT_EQ(plain.runner.decode_slice_rows, 1);
  EXPECT_EQ(plain.runner.max_tokens_per_step, 256 + 4);
  const ServingConfig cuda = fill({"--speculative-tokens", "2", "--device", "cuda",
                                   "--max-prefill-tokens", "256", "--max-batch-size", "4"});
  EXPECT_EQ(cuda.runner.device, "cuda");
  EXPECT_EQ(cuda.runner.state_records, 3);
  EXPECT_EQ(cuda.runner.decode_slice_rows, 3);
  EXPECT_EQ(cuda.runner.max_tokens_per_step, 256 + 4 * 3);
  const ServingConfig recompute =
      fill({"--speculative-tokens", "3", "--speculative-rollback", "recompute",
            "--max-prefill-tokens", "256", "--max-batch-size", "4"});
  EXPECT_EQ(recompute.runner.decode_slice_rows, 7);
  EXPECT_EQ(recompute.runner.max_tokens_per_step, 256 + 4 * 7);
}

TEST(SpeculationOptions, SeveralRanksAreRefusedAtStartNamingTheFlag) {
  const std::string ranks = refusal({"--speculative-tokens", "1", "--tp-size", "2"});
  EXPECT_NE(ranks.find("--speculative-tokens 1 with 2 ranks: not implemented yet"),
            std::string::npos)
      << ranks;
  EXPECT_THROW(fill({"--speculative-tokens", "5"}), Error);  // beyond the drafter's chain
}

}  // namespace
}  // namespace sparkglm
