#include "engine/core/cli_args.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace sparkglm {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(CliArgs, AFlagGivenButNeverReadIsRefusedByName) {
  const CliArgs a({"--model", "/m", "--num-layers", "8"}, {});
  a.allow_only({"--model", "--num-layers"});  // known to the command...
  EXPECT_EQ(a.str("--model", ""), "/m");
  // ...but this command, with --model, never asked for --num-layers.
  const std::string e = error_of([&] { a.reject_unread("sparkglm logits"); });
  EXPECT_NE(e.find("--num-layers: given but not used by sparkglm logits"), std::string::npos) << e;
}

TEST(CliArgs, EveryGetterCountsAsARead) {
  const CliArgs a({"--a", "1", "--b", "x", "--c", "1,2", "--d", "y", "--e"}, {"--e"});
  EXPECT_EQ(a.integer("--a", 0, 0, 9), 1);
  EXPECT_EQ(a.str("--b", ""), "x");
  EXPECT_EQ(a.int_list("--c"), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(a.required("--d"), "y");
  // The switch is the one flag no getter has asked for.
  EXPECT_NE(error_of([&] { a.reject_unread("cmd"); }).find("--e: given but not used"),
            std::string::npos);
  EXPECT_TRUE(a.has("--e"));
  EXPECT_EQ(error_of([&] { a.reject_unread("cmd"); }), "");
}

TEST(CliArgs, AFlagNotGivenIsNeverUnread) {
  const CliArgs a({}, {});
  EXPECT_EQ(a.integer("--threads", 3, 0, 9), 3);
  EXPECT_EQ(error_of([&] { a.reject_unread("cmd"); }), "");
}

TEST(CliArgs, UnknownFlagsAreRefused) {
  const CliArgs a({"--prefill-chunk", "64"}, {});
  EXPECT_NE(error_of([&] { a.allow_only({"--tokens"}); }).find("unknown flag --prefill-chunk"),
            std::string::npos);
}

TEST(CliArgs, AnArgumentThatIsNotUtf8IsRefusedByPosition) {
  EXPECT_NO_THROW(refuse_non_utf8_arguments({"--title", "caf\xC3\xA9", "\xF0\x9F\x99\x82"}));
  try {
    refuse_non_utf8_arguments({"--out", "ok", "--title", "caf\xE9"});
    ADD_FAILURE() << "a Latin-1 byte was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("argument 4 (\"caf\xEF\xBF\xBD\") is not valid UTF-8"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sparkglm
