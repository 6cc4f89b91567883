#include "engine/options/option_registry.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/options/effective_config.h"
#include "tests/options/unimplemented_option.h"

namespace sparkglm {
namespace {

// The message of the Error `f` throws (checking its kind), or "" when it throws none.
std::string error_of(const std::function<void()>& f, ErrorKind kind = ErrorKind::kInvalidArgument) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  return "";
}

std::string flag_error(const std::vector<std::string>& args) {
  return error_of([&] { parse_command_line(args); });
}

OptionValue parsed(const std::string& name, const std::string& text) {
  return serving_options().at(name).parse(text, "--" + name);
}

TEST(OptionRegistry, ServingTableIsConsistent) {
  const auto problems = OptionRegistry::table_problems(serving_options().specs());
  EXPECT_TRUE(problems.empty()) << problems.front();
}

TEST(OptionRegistry, ServingTableHasTheDocumentedOptions) {
  const OptionRegistry& r = serving_options();
  for (const char* name : {"preset",
                           "model",
                           "num-layers",
                           "seed",
                           "device",
                           "bind",
                           "port",
                           "api-key",
                           "max-seq-len",
                           "max-num-seqs",
                           "max-batch-size",
                           "max-prefill-tokens",
                           "block-size",
                           "kv-cache-dtype",
                           "kv-cache-memory-bytes",
                           "gpu-memory-utilization",
                           "enable-prefix-caching",
                           "world-size",
                           "rank",
                           "master-addr",
                           "master-port",
                           "tp-size",
                           "threads",
                           "request-timeout",
                           "header-timeout",
                           "idle-timeout",
                           "max-body-bytes",
                           "max-connections",
                           "precision-mode",
                           "shutdown-grace"}) {
    EXPECT_NE(r.find(name), nullptr) << name;
  }
  EXPECT_EQ(r.at("block-size").default_value, OptionValue(int64_t(16)));
  EXPECT_EQ(r.at("port").default_value, OptionValue(int64_t(8893)));
  EXPECT_EQ(r.at("bind").default_value, OptionValue(std::string("127.0.0.1")));
  EXPECT_EQ(r.at("request-timeout").default_value, OptionValue(0.0));
  EXPECT_EQ(r.at("kv-cache-dtype").allowed, (std::vector<std::string>{"bf16", "fp8_g128"}));
  EXPECT_EQ(r.at("precision-mode").allowed, (std::vector<std::string>{"strict", "spark"}));
  EXPECT_EQ(r.at("device").allowed, (std::vector<std::string>{"cpu", "cuda"}));
  EXPECT_EQ(r.at("preset").allowed, (std::vector<std::string>{"glm-5.3-flash", "tinyglm",
                                                              "tinyglm-micro", "tinyglm-wide"}));
  EXPECT_TRUE(r.at("api-key").secret);
  EXPECT_EQ(r.at("api-key").section, ProfileSection::kCommandLineOnly);
  EXPECT_TRUE(r.at("rank").per_rank);
  for (const OptionSpec& s : r.specs())
    EXPECT_NE(r.usage().find("--" + s.name), std::string::npos) << s.name;
}

TEST(OptionRegistry, TableProblemsNameTheOption) {
  OptionSpec good;
  good.name = "max-widgets";
  good.type = OptionType::kInt;
  good.default_value = good.builtin = int64_t(4);
  good.min_int = 1;
  good.max_int = 8;
  good.help = "widgets";
  EXPECT_TRUE(OptionRegistry::table_problems({good}).empty());

  auto problem = [&](const std::function<void(OptionSpec&)>& edit) {
    OptionSpec s = good;
    edit(s);
    const auto problems = OptionRegistry::table_problems({s});
    return problems.empty() ? std::string() : problems.front();
  };
  EXPECT_NE(
      problem([](OptionSpec& s) {
        s.default_value = s.builtin = int64_t(9);
      }).find("option \"max-widgets\": default or built-in value is not an integer in [1, 8]"),
      std::string::npos);
  EXPECT_NE(
      problem([](OptionSpec& s) { s.default_value = int64_t(5); }).find("without a valid receipt"),
      std::string::npos);
  EXPECT_NE(problem([](OptionSpec& s) { s.name = "Max_Widgets"; }).find("lowercase"),
            std::string::npos);
  EXPECT_NE(problem([](OptionSpec& s) { s.secret = true; }).find("command line only"),
            std::string::npos);
  EXPECT_NE(problem([](OptionSpec& s) {
              s.receipt = ReceiptRef{"g3-run", std::string(64, 'a')};
            }).find("a receipt but no promoted default"),
            std::string::npos);
  // A promoted default is consistent only with a well-formed receipt.
  OptionSpec promoted = good;
  promoted.default_value = int64_t(5);
  promoted.receipt = ReceiptRef{"2026-10-21-widgets-g3", std::string(64, 'a')};
  EXPECT_TRUE(OptionRegistry::table_problems({promoted}).empty());
  promoted.receipt->sha256 = std::string(64, 'A');
  EXPECT_FALSE(OptionRegistry::table_problems({promoted}).empty());
  EXPECT_EQ(OptionRegistry::table_problems({good, good}).size(), 1u);
  // An option that is not implemented can be neither promoted nor a candidate.
  promoted.receipt->sha256 = std::string(64, 'a');
  promoted.not_implemented = "no widgets yet";
  EXPECT_NE(OptionRegistry::table_problems({promoted}).front().find("not implemented"),
            std::string::npos);
  EXPECT_NE(problem([](OptionSpec& s) {
              s.not_implemented = "no widgets yet";
              s.status = OptionStatus::kCandidate;
            }).find("not implemented, so it can be neither promoted nor a candidate"),
            std::string::npos);
}

TEST(OptionRegistry, UsageMarksWhatIsNotImplemented) {
  // The table plus one option marked not implemented (unimplemented_option.h).
  std::vector<OptionSpec> table = serving_options().specs();
  table.push_back(testing::unimplemented_option());
  const std::string usage = OptionRegistry(table).usage();
  auto line_of = [&](const std::string& flag) {
    const size_t at = usage.find("  --" + flag);
    EXPECT_NE(at, std::string::npos) << flag;
    return at == std::string::npos ? std::string() : usage.substr(at, usage.find('\n', at) - at);
  };
  EXPECT_NE(line_of("weight-layout").find("NOT IMPLEMENTED YET (no kernel reads tiles)"),
            std::string::npos);
  EXPECT_EQ(line_of("precision-mode").find("NOT IMPLEMENTED YET"), std::string::npos);
}

TEST(OptionParse, IntegerOutOfRangeNamesTheOptionAndRange) {
  EXPECT_EQ(flag_error({"--max-num-seqs=0"}),
            "invalid argument: --max-num-seqs: expected an integer in [1, 1024], got \"0\"");
  EXPECT_EQ(flag_error({"--port", "65536"}),
            "invalid argument: --port: expected an integer in [0, 65535], got \"65536\"");
  for (const char* text : {"4x", "", "1.5", "+4", " 4", "0x10", "99999999999999999999"}) {
    EXPECT_NE(flag_error({std::string("--max-num-seqs=") + text})
                  .find("--max-num-seqs: expected an integer in [1, 1024]"),
              std::string::npos)
        << text;
  }
  EXPECT_EQ(parsed("max-num-seqs", "1024"), OptionValue(int64_t(1024)));
}

TEST(OptionParse, NumbersMustBeFiniteAndInRange) {
  EXPECT_EQ(flag_error({"--gpu-memory-utilization=1.5"}),
            "invalid argument: --gpu-memory-utilization: expected a number in [0.05, 1.0], got "
            "\"1.5\"");
  for (const char* text : {"nan", "inf", "0.9x", "", "-0.5"})
    EXPECT_NE(flag_error({std::string("--gpu-memory-utilization=") + text}), "") << text;
  EXPECT_EQ(parsed("gpu-memory-utilization", "0.88"), OptionValue(0.88));
  EXPECT_EQ(parsed("request-timeout", "0"), OptionValue(0.0));
  EXPECT_EQ(parsed("header-timeout", "2.5e-1"), OptionValue(0.25));
}

TEST(OptionParse, EnumNamesTheAllowedValues) {
  EXPECT_EQ(flag_error({"--kv-cache-dtype", "fp8"}),
            "invalid argument: --kv-cache-dtype: expected one of bf16, fp8_g128, got \"fp8\"");
  EXPECT_NE(flag_error({"--precision-mode=fast"}).find("one of strict, spark"), std::string::npos);
  EXPECT_NE(flag_error({"--device=gpu"}).find("one of cpu, cuda"), std::string::npos);
  EXPECT_NE(flag_error({"--preset=glm5"}).find("one of glm-5.3-flash, tinyglm, tinyglm-micro"),
            std::string::npos);
  EXPECT_NE(flag_error({"--bind="}).find("--bind: expected a non-empty string"), std::string::npos);
  EXPECT_EQ(parsed("kv-cache-dtype", "fp8_g128"), OptionValue(std::string("fp8_g128")));
}

TEST(OptionParse, ByteCountsTakeUnits) {
  EXPECT_EQ(parsed("kv-cache-memory-bytes", "48GiB"), OptionValue(int64_t(48) << 30));
  EXPECT_EQ(parsed("kv-cache-memory-bytes", "2g"), OptionValue(int64_t(2) << 30));
  EXPECT_EQ(parsed("max-body-bytes", "1000KB"), OptionValue(int64_t(1000000)));
  EXPECT_EQ(parsed("max-body-bytes", "65536"), OptionValue(int64_t(65536)));
  EXPECT_EQ(parsed("max-body-bytes", "1MiB"), OptionValue(int64_t(1) << 20));
  for (const char* text : {"12x", "1.5G", "-1", "GiB", "9999999999T", "8PiB"}) {
    EXPECT_NE(flag_error({std::string("--kv-cache-memory-bytes=") + text})
                  .find("--kv-cache-memory-bytes: expected a byte count in [0, 1125899906842624]"),
              std::string::npos)
        << text;
  }
  EXPECT_NE(flag_error({"--max-body-bytes=1000"}).find("[1024, 4294967296]"), std::string::npos);
}

TEST(OptionParse, BoolFlagForms) {
  auto value_of = [](const std::vector<std::string>& args) {
    const CommandLine cli = parse_command_line(args);
    EXPECT_EQ(cli.values.size(), 1u);
    return cli.values.at(0).value;
  };
  EXPECT_EQ(value_of({"--enable-prefix-caching"}), OptionValue(true));
  EXPECT_EQ(value_of({"--enable-prefix-caching=false"}), OptionValue(false));
  EXPECT_EQ(value_of({"--no-enable-prefix-caching"}), OptionValue(false));
  EXPECT_EQ(flag_error({"--enable-prefix-caching=yes"}),
            "invalid argument: --enable-prefix-caching: expected true or false, got \"yes\"");
  // A bool flag takes no separate value, so a following word is an unexpected argument.
  EXPECT_NE(flag_error({"--enable-prefix-caching", "true"}).find("unexpected argument \"true\""),
            std::string::npos);
  EXPECT_NE(flag_error({"--no-port"}).find("unknown option --no-port"), std::string::npos);
}

TEST(OptionCommandLine, UnknownOptionIsNamed) {
  EXPECT_EQ(flag_error({"--max-num-seq", "4"}),
            "invalid argument: unknown option --max-num-seq (did you mean --max-num-seqs?)");
  EXPECT_EQ(flag_error({"--frobnicate=1"}), "invalid argument: unknown option --frobnicate");
  EXPECT_EQ(flag_error({"--port=1", "--kv_cache_dtype=bf16"}),
            "invalid argument: unknown option --kv_cache_dtype (did you mean --kv-cache-dtype?)");
}

TEST(OptionCommandLine, RepeatedMissingAndPositionalAreErrors) {
  EXPECT_EQ(flag_error({"--port=1", "--port", "2"}), "invalid argument: --port given twice");
  EXPECT_EQ(flag_error({"--no-enable-prefix-caching", "--enable-prefix-caching"}),
            "invalid argument: --enable-prefix-caching given twice");
  EXPECT_NE(flag_error({"--port"}).find("--port: expected a value (an integer in [0, 65535])"),
            std::string::npos);
  EXPECT_NE(flag_error({"--port", "--bind=x"}).find("--port: expected a value"), std::string::npos);
  EXPECT_NE(flag_error({"/models/glm"}).find("unexpected argument \"/models/glm\""),
            std::string::npos);
  EXPECT_NE(flag_error({"--profile"}).find("--profile: expected a value"), std::string::npos);
  EXPECT_EQ(flag_error({"--profile=a", "--profile=b"}), "invalid argument: --profile given twice");
}

TEST(OptionCommandLine, ValuesKeepTheirOrderAndTypes) {
  const CommandLine cli = parse_command_line(
      {"--profile", "4x1m", "--max-num-seqs", "2", "--bind=0.0.0.0", "--max-body-bytes=2MiB"});
  EXPECT_EQ(cli.profile, "4x1m");
  ASSERT_EQ(cli.values.size(), 3u);
  EXPECT_EQ(cli.values[0].name, "max-num-seqs");
  EXPECT_EQ(cli.values[0].value, OptionValue(int64_t(2)));
  EXPECT_EQ(cli.values[1].value, OptionValue(std::string("0.0.0.0")));
  EXPECT_EQ(cli.values[2].value, OptionValue(int64_t(2) << 20));
}

TEST(OptionSecret, ApiKeyNeverAppearsInMessages) {
  const OptionSpec& key = serving_options().at("api-key");
  EXPECT_EQ(key.format(std::string("s3cret")), "<redacted>");
  EXPECT_EQ(key.format(std::string()), "");
  const std::string e = flag_error({"--api-key="});
  EXPECT_NE(e.find("--api-key: expected a non-empty string"), std::string::npos);
}

TEST(OptionSha256, MatchesTheStandardVectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

}  // namespace
}  // namespace sparkglm
