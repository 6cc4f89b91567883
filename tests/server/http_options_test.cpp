// The HTTP server's I/O threads and write timeout are typed options of the registry: parsed,
// range-checked, and reported in the effective configuration like every other option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/options/effective_config.h"
#include "engine/options/option_registry.h"

namespace sparkglm {
namespace {

EffectiveConfig parsed(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--preset", "tinyglm-micro"};
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_serve_args(args);
}

std::string error_of(std::vector<std::string> extra) {
  try {
    parsed(std::move(extra));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HttpOptions, IoThreadsAndWriteTimeoutAreTypedWithDefaults) {
  const OptionRegistry& r = serving_options();
  EXPECT_EQ(r.at("io-threads").type, OptionType::kInt);
  EXPECT_EQ(r.at("io-threads").default_value, OptionValue(int64_t(1)));
  EXPECT_EQ(r.at("write-timeout").type, OptionType::kFloat);
  EXPECT_EQ(r.at("write-timeout").default_value, OptionValue(30.0));
  const EffectiveConfig d = parsed({});
  EXPECT_EQ(d.integer("io-threads"), 1);
  EXPECT_EQ(d.number("write-timeout"), 30.0);
  const EffectiveConfig c = parsed({"--io-threads", "4", "--write-timeout", "2.5"});
  EXPECT_EQ(c.integer("io-threads"), 4);
  EXPECT_EQ(c.number("write-timeout"), 2.5);
  EXPECT_EQ(c.to_json()["io-threads"], 4);
  EXPECT_EQ(c.to_json()["write-timeout"], 2.5);
}

TEST(HttpOptions, BadValuesNameTheOption) {
  for (const auto& bad : std::vector<std::vector<std::string>>{{"--io-threads", "0"},
                                                               {"--io-threads", "two"},
                                                               {"--write-timeout", "0"},
                                                               {"--write-timeout", "-1"},
                                                               {"--write-timeout", "soon"}}) {
    const std::string e = error_of(bad);
    EXPECT_NE(e.find(bad[0]), std::string::npos) << bad[0] << " " << bad[1] << ": " << e;
  }
}

}  // namespace
}  // namespace sparkglm
