// --speculative-tokens fills the scheduler's drafts and the runner's KDA state records (k + 1
// rows per slot, or 1 with --speculative-rollback recompute, which the effective config echoes),
// and is refused at start, naming the flag, where the verify step does not run yet: --device
// cuda and several ranks.
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

TEST(SpeculationOptions, CudaAndSeveralRanksAreRefusedAtStartNamingTheFlag) {
  const std::string cuda = refusal({"--speculative-tokens", "2", "--device", "cuda"});
  EXPECT_NE(cuda.find("--speculative-tokens 2 with --device cuda: not implemented yet on cuda"),
            std::string::npos)
      << cuda;
  const std::string ranks = refusal({"--speculative-tokens", "1", "--tp-size", "2"});
  EXPECT_NE(ranks.find("--speculative-tokens 1 with 2 ranks: not implemented yet"),
            std::string::npos)
      << ranks;
  EXPECT_THROW(fill({"--speculative-tokens", "5"}), Error);  // beyond the drafter's chain
}

}  // namespace
}  // namespace sparkglm
