#include "engine/options/serving_config.h"

#include <gtest/gtest.h>

#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/model/precision_mode.h"
#include "tests/options/unimplemented_option.h"

namespace sparkglm {
namespace {

EffectiveConfig resolve(const std::vector<std::string>& args,
                        const OptionRegistry& registry = serving_options()) {
  return EffectiveConfig::resolve(registry, nullptr, parse_command_line(args, registry));
}

// The options of `registry` that nothing consumes: neither read by fill_serving_config (from a
// configuration at the defaults) nor marked not implemented; and those marked not implemented
// that the fill reads all the same (a contradiction). One line each.
std::vector<std::string> unconsumed(const OptionRegistry& registry) {
  const EffectiveConfig c = resolve({}, registry);
  fill_serving_config(c);
  std::vector<std::string> out;
  for (const OptionSpec& s : registry.specs()) {
    const bool read = c.reads().count(s.name) > 0, refused = !s.not_implemented.empty();
    if (!read && !refused) out.push_back("--" + s.name + ": registered and read by nothing");
    if (read && refused) out.push_back("--" + s.name + ": marked not implemented but read");
  }
  return out;
}

TEST(ServingConfig, EveryRegisteredOptionIsReadOrRefusedAsNotImplemented) {
  const std::vector<std::string> problems = unconsumed(serving_options());
  EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
}

TEST(ServingConfig, TheRegistryWalkCatchesAnOptionNothingReads) {
  // The negative control: the same walk over the table plus one option nobody reads.
  std::vector<OptionSpec> table = serving_options().specs();
  OptionSpec extra;
  extra.name = "turbo-mode";
  extra.type = OptionType::kBool;
  extra.default_value = extra.builtin = false;
  extra.help = "a switch nothing reads";
  table.push_back(extra);
  EXPECT_EQ(unconsumed(OptionRegistry(table)),
            std::vector<std::string>{"--turbo-mode: registered and read by nothing"});
  table.back().not_implemented = "no turbo";
  EXPECT_TRUE(unconsumed(OptionRegistry(table)).empty());
}

// A valid value other than the built-in, as flag text.
std::string other_value(const OptionSpec& s) {
  switch (s.type) {
    case OptionType::kBool:
      return std::get<bool>(s.builtin) ? "false" : "true";
    case OptionType::kInt:
    case OptionType::kBytes:
      return std::to_string(std::get<int64_t>(s.builtin) == s.max_int ? s.min_int : s.max_int);
    case OptionType::kFloat:
      return std::to_string(s.max_float);
    case OptionType::kString:
      return "10.0.0.9";
    case OptionType::kEnum:
      for (const std::string& v : s.allowed)
        if (v != std::get<std::string>(s.builtin)) return v;
  }
  return "";
}

TEST(ServingConfig, NotImplementedOptionsAreRefusedAtStartAwayFromTheirDefault) {
  // The table plus one option marked not implemented (unimplemented_option.h).
  std::vector<OptionSpec> table = serving_options().specs();
  table.push_back(testing::unimplemented_option());
  const OptionRegistry registry(table);
  int refused = 0;
  for (const OptionSpec& s : registry.specs()) {
    if (s.not_implemented.empty()) continue;
    ++refused;
    const std::string text = other_value(s);
    try {
      fill_serving_config(resolve({"--" + s.name + "=" + text}, registry));
      ADD_FAILURE() << "--" << s.name << "=" << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("--" + s.name + "="), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(": not implemented yet (" + s.not_implemented + ")"),
                std::string::npos)
          << e.what();
    }
    // The built-in value, given explicitly, describes what the engine does: accepted.
    EXPECT_NO_THROW(
        fill_serving_config(resolve({"--" + s.name + "=" + s.format(s.builtin)}, registry)))
        << s.name;
  }
  for (const char* name :
       {"precision-mode", "world-size", "rank", "master-addr", "master-port", "tp-size"})
    EXPECT_TRUE(serving_options().at(name).not_implemented.empty()) << name;
  EXPECT_GE(refused, 1);
}

TEST(ServingConfig, PrecisionModeLandsInTheRunnerRequest) {
  EXPECT_EQ(fill_serving_config(resolve({})).runner.precision_mode, PrecisionMode::kStrict);
  EXPECT_EQ(fill_serving_config(resolve({"--precision-mode", "spark"})).runner.precision_mode,
            PrecisionMode::kSpark);
}

TEST(ServingConfig, EngineDefaultsAndRegistryDefaultsAgree) {
  const ServingConfig c = fill_serving_config(resolve({}));
  const SchedulerLimits limits;
  EXPECT_EQ(c.scheduler.max_num_seqs, limits.max_num_seqs);
  EXPECT_EQ(c.scheduler.max_batch_size, limits.max_batch_size);
  EXPECT_EQ(c.scheduler.max_prefill_tokens, limits.max_prefill_tokens);
  EXPECT_EQ(c.scheduler.prefill_align, limits.prefill_align);
  EXPECT_EQ(c.scheduler.reserve_output_tokens, limits.reserve_output_tokens);
  const RunnerRequest runner;
  EXPECT_EQ(c.runner.device, runner.device);
  EXPECT_EQ(c.runner.block_size, runner.block_size);
  EXPECT_EQ(c.runner.max_num_seqs, runner.max_num_seqs);
  EXPECT_EQ(c.runner.max_seq_len, runner.max_seq_len);
  EXPECT_EQ(c.runner.kv_dtype, runner.kv_dtype);
  EXPECT_EQ(c.runner.kv_cache_bytes, runner.kv_cache_bytes);
  EXPECT_EQ(c.runner.gpu_memory_utilization, runner.gpu_memory_utilization);
  EXPECT_EQ(c.runner.cuda_graphs, runner.cuda_graphs);
  EXPECT_EQ(c.runner.profile_steps, runner.profile_steps);
  EXPECT_EQ(c.runner.precision_mode, runner.precision_mode);
  EXPECT_EQ(c.runner.max_tokens_per_step, limits.max_prefill_tokens + limits.max_batch_size);
}

TEST(ServingConfig, OptionsLandInTheirTypedFields) {
  const ServingConfig c = fill_serving_config(resolve({"--preset",
                                                       "tinyglm",
                                                       "--num-layers",
                                                       "8",
                                                       "--max-num-seqs",
                                                       "3",
                                                       "--max-prefill-tokens",
                                                       "256",
                                                       "--max-seq-len",
                                                       "2048",
                                                       "--enforce-eager",
                                                       "--profile-steps",
                                                       "--device",
                                                       "cuda",
                                                       "--kv-cache-dtype",
                                                       "fp8_g128",
                                                       "--port",
                                                       "0",
                                                       "--io-threads",
                                                       "2",
                                                       "--header-timeout",
                                                       "1.5",
                                                       "--request-timeout",
                                                       "7",
                                                       "--sse-flush-interval",
                                                       "0.002",
                                                       "--threads",
                                                       "5",
                                                       "--shutdown-grace",
                                                       "4"}));
  EXPECT_EQ(c.runner.preset, "tinyglm");
  EXPECT_EQ(c.runner.num_layers, 8);
  EXPECT_EQ(c.runner.device, "cuda");
  EXPECT_EQ(c.runner.kv_dtype, KvDtype::kFp8G128);
  EXPECT_FALSE(c.runner.cuda_graphs);
  EXPECT_TRUE(c.runner.profile_steps);
  EXPECT_EQ(c.scheduler.max_num_seqs, 3);
  EXPECT_EQ(c.scheduler.max_batch_size, 3);  // --max-batch-size 0 = --max-num-seqs
  EXPECT_EQ(c.scheduler.max_prefill_tokens, 256);
  EXPECT_EQ(c.scheduler.max_seq_len, 2048);
  EXPECT_EQ(c.runner.max_seq_len, 2048);
  EXPECT_EQ(c.runner.max_tokens_per_step, 256 + 3);
  EXPECT_EQ(c.http.port, 0);
  EXPECT_EQ(c.http.io_threads, 2);
  EXPECT_EQ(c.http.header_timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.routes.request_timeout_s, 7.0);
  EXPECT_EQ(c.routes.stream_flush_interval, std::chrono::microseconds(2000));
  EXPECT_EQ(c.threads, 5);
  EXPECT_EQ(c.shutdown_grace_s, 4.0);
}

TEST(ServingConfig, SchedulerLimitErrorsNameOptionsThatExist) {
  // Each bad user limit is refused naming a flag; that flag must be a registered option.
  const CacheGeometry g{64, 16, 4};
  std::vector<std::function<void(SchedulerLimits&)>> breakers = {
      [](SchedulerLimits& l) { l.max_num_seqs = 5; },
      [](SchedulerLimits& l) { l.max_batch_size = 0; },
      [](SchedulerLimits& l) { l.max_prefill_tokens = 32; },
      [](SchedulerLimits& l) { l.max_seq_len = 1; }};
  const std::regex flag("--([a-z0-9-]+)");
  for (const auto& brk : breakers) {
    SchedulerLimits l;
    brk(l);
    try {
      l.validate(g);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      std::smatch m;
      const std::string what = e.what();
      ASSERT_TRUE(std::regex_search(what, m, flag)) << what;
      EXPECT_NE(serving_options().find(m[1].str()), nullptr) << what;
    }
  }
}

}  // namespace
}  // namespace sparkglm
