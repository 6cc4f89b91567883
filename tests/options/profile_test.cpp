#include "engine/options/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "engine/core/error.h"
#include "engine/options/effective_config.h"
#include "tests/support/build_paths.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The repository's profiles/, found from the test data directory (tests/data -> the root).
const std::string kProfiles =
    (fs::path(sparkglm::testing::test_data_dir()).parent_path().parent_path() / "profiles")
        .string();

class ProfileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparkglm_profile_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / (name + ".json")).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  // A valid profile named `name`, edited by `edit`, written and loaded; returns the error message
  // (checking that it names the file), or "" when it loads.
  std::string error_of(const std::function<void(json&)>& edit, const std::string& name = "tiny",
                       const OptionRegistry& registry = serving_options()) {
    json j = {{"name", name},
              {"description", "a test profile"},
              {"model", "tinyglm"},
              {"precision_mode", "strict"},
              {"limits", {{"max_num_seqs", 2}, {"max_seq_len", 4096}, {"max_prefill_tokens", 512}}},
              {"options", {{"block-size", 16}}},
              {"server_args", {{"port", 0}}}};
    edit(j);
    const std::string path = write(name, j.dump(2));
    try {
      Profile::load(path, "", registry);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig) << e.what();
      EXPECT_NE(std::string(e.what()).find(path + ": "), std::string::npos) << e.what();
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST(Profile, EveryShippedProfileLoadsAndValidates) {
  struct Shipped {
    const char* name;
    int64_t seqs, context, ranks;
  };
  const Shipped shipped[] = {{"4x1m", 4, 1048576, 2},
                             {"4x512k", 4, 524288, 2},
                             {"8x128k", 8, 131072, 2},
                             {"4x1m-tp4", 4, 1048576, 4}};
  EXPECT_EQ(profile_names(kProfiles),
            (std::vector<std::string>{"4x1m", "4x1m-tp4", "4x512k", "8x128k"}));
  for (const Shipped& s : shipped) {
    SCOPED_TRACE(s.name);
    const Profile p = Profile::load(s.name, kProfiles);
    EXPECT_EQ(p.name(), s.name);
    EXPECT_FALSE(p.description().empty());
    EXPECT_EQ(p.sha256().size(), 64u);
    EXPECT_EQ(p.values().at("preset"), OptionValue(std::string("glm-5.3-flash")));
    // The whole profile, resolved without flags, passes the serving checks too.
    const EffectiveConfig c = parse_serve_args({"--profile", s.name}, kProfiles);
    EXPECT_EQ(c.str("preset"), "glm-5.3-flash");
    EXPECT_EQ(c.str("precision-mode"), "strict");
    EXPECT_EQ(c.integer("max-num-seqs"), s.seqs);
    EXPECT_EQ(c.integer("max-batch-size"), s.seqs);
    EXPECT_EQ(c.integer("max-seq-len"), s.context);
    EXPECT_EQ(c.integer("max-prefill-tokens"), 8192);
    EXPECT_EQ(c.integer("block-size"), 16);
    // Behaviour options stay at their defaults until a receipt promotes them (G0 checks this).
    EXPECT_TRUE(p.unbacked_options().empty());
    EXPECT_EQ(c.str("kv-cache-dtype"), "bf16");
    EXPECT_FALSE(c.boolean("enable-prefix-caching"));
    EXPECT_EQ(c.integer("world-size"), s.ranks);
    EXPECT_EQ(c.integer("tp-size"), s.ranks);
    EXPECT_EQ(c.str("device"), "cuda");
    EXPECT_EQ(c.number("gpu-memory-utilization"), s.ranks == 4 ? 0.72 : 0.88);
    EXPECT_TRUE(c.log_lines().empty());
  }
}

TEST(Profile, LoadsByPathAndByNameWithTheSameIdentity) {
  const Profile by_name = Profile::load("4x512k", kProfiles);
  const Profile by_path = Profile::load(kProfiles + "/4x512k.json", "/nonexistent");
  EXPECT_EQ(by_name.sha256(), by_path.sha256());
  EXPECT_EQ(by_name.values(), by_path.values());
  EXPECT_EQ(by_name.field_of("max-num-seqs"), "limits.max_num_seqs");
  EXPECT_EQ(by_name.field_of("block-size"), "options.block-size");
  EXPECT_EQ(by_name.field_of("kv-cache-dtype"), "");
  EXPECT_EQ(by_name.field_of("preset"), "model");
  EXPECT_EQ(by_name.field_of("rank"), "");
}

TEST(Profile, UnknownNameListsTheAvailableProfiles) {
  try {
    Profile::load("4x2m", kProfiles);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no profile \"4x2m\" in " + kProfiles +
                                         " (available: 4x1m, 4x1m-tp4, 4x512k, 8x128k)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Profile::load("../4x1m", kProfiles), Error);
  try {
    Profile::load("/nonexistent/x.json", kProfiles);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.json"), std::string::npos);
  }
}

// A profile claiming 8 GiB (sparse: no disk) is refused by its size before it is read whole.
TEST_F(ProfileFiles, HugeProfileIsRefusedBeforeItIsRead) {
  const std::string path = write("huge", "{}");
  fs::resize_file(path, uintmax_t(8) << 30);
  try {
    Profile::load(path, "", serving_options());
    ADD_FAILURE() << "an 8 GiB profile was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig);
    EXPECT_EQ(e.message(), path +
                               ": 8589934592 bytes, larger than the limit of 16777216 bytes "
                               "for this JSON file");
  }
}

TEST_F(ProfileFiles, ShaIsOfTheFileBytes) {
  const std::string bytes =
      R"({"name": "tiny", "description": "t", "model": "tinyglm", "precision_mode": "strict", )"
      R"("limits": {"max_num_seqs": 2, "max_seq_len": 4096, "max_prefill_tokens": 512}})"
      "\n";
  const Profile p = Profile::load(write("tiny", bytes), "");
  EXPECT_EQ(p.sha256(), "07bc98371c2fd773143c7860810b64ff31360757b367f2565fb9a07baf1ee26b");
  // The same settings in other bytes are another identity.
  const Profile spaced = Profile::load(write("tiny", bytes + "\n"), "");
  EXPECT_NE(spaced.sha256(), p.sha256());
  EXPECT_EQ(spaced.values(), p.values());
}

TEST_F(ProfileFiles, UnknownOptionNamesFileAndField) {
  EXPECT_NE(error_of([](json& j) {
              j["options"]["frobnicate"] = 1;
            }).find(": options.frobnicate: unknown option"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["limits"]["max_num_seq"] = 1;
            }).find(": limits.max_num_seq: unknown option (did you mean max-num-seqs?)"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) { j["tuning"] = json::object(); }).find(": tuning: unknown field"),
            std::string::npos);
}

TEST_F(ProfileFiles, WrongTypeNamesFileFieldAndExpectation) {
  EXPECT_NE(error_of([](json& j) {
              j["limits"]["max_num_seqs"] = "four";
            }).find(": limits.max_num_seqs: expected an integer in [1, 1024], got \"four\""),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["limits"]["max_num_seqs"] = 2.5;
            }).find(": limits.max_num_seqs: expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["limits"]["max_seq_len"] = 2097152;
            }).find(": limits.max_seq_len: expected an integer in [0, 1048576], got 2097152"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["options"]["enable-prefix-caching"] = "true";
            }).find(": options.enable-prefix-caching: expected true or false, got \"true\""),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["options"]["kv-cache-dtype"] = "fp8";
            }).find(": options.kv-cache-dtype: expected one of bf16, fp8_g128, got \"fp8\""),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["precision_mode"] = "fast";
            }).find(": precision_mode: expected one of strict, spark"),
            std::string::npos);
  EXPECT_NE(
      error_of([](json& j) { j["limits"] = json::array(); }).find(": limits: expected an object"),
      std::string::npos);
  // Byte counts may be written with a unit.
  EXPECT_EQ(error_of([](json& j) { j["limits"]["kv_cache_memory_bytes"] = "48GiB"; }), "");
}

TEST_F(ProfileFiles, EachOptionHasOneSection) {
  EXPECT_NE(error_of([](json& j) {
              j["options"]["port"] = 1;
            }).find(": options.port: port belongs in server_args"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["server_args"]["rank"] = 1;
            }).find(": server_args.rank: rank is set on the command line only"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["server_args"]["api-key"] = "k";
            }).find(": server_args.api-key: api-key is set on the command line only"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["options"]["preset"] = "tinyglm";
            }).find(": options.preset: preset is set by the profile's top-level field"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["limits"]["max-num-seqs"] = 3;
            }).find(": limits.max_num_seqs: max-num-seqs is already set by limits.max-num-seqs"),
            std::string::npos);
}

TEST_F(ProfileFiles, RequiredFieldsAreNamed) {
  EXPECT_NE(error_of([](json& j) { j.erase("model"); }).find(": model: missing"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) { j.erase("description"); }).find(": description: missing"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["limits"].erase("max_seq_len");
            }).find(": limits.max_seq_len: missing"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) {
              j["name"] = "other";
            }).find(": name: \"other\" differs from the file name"),
            std::string::npos);
  EXPECT_NE(error_of([](json& j) { j["model"] = "glm-5.3-flsh"; })
                .find(": model: expected a preset (one of glm-5.3-flash, tinyglm, tinyglm-micro, "
                      "tinyglm-wide)"),
            std::string::npos);
}

TEST_F(ProfileFiles, MalformedJsonAndRepeatedKeysAreNamed) {
  const std::string path = write("tiny", R"({"name": "tiny", "name": "tiny"})");
  try {
    Profile::load(path, "");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "invalid config: " + path + ": key \"name\" appears twice");
  }
  EXPECT_THROW(Profile::load(write("tiny", "{\"name\": "), ""), Error);
}

TEST_F(ProfileFiles, RelativeModelPathIsRelativeToTheProfile) {
  EXPECT_EQ(error_of([](json& j) { j["model"] = "./ckpt/glm"; }), "");
  const Profile p = Profile::load((dir_ / "tiny.json").string(), "");
  EXPECT_EQ(p.values().at("model"), OptionValue((dir_ / "ckpt/glm").lexically_normal().string()));
  EXPECT_EQ(p.values().count("preset"), 0u);
}

TEST_F(ProfileFiles, PromotionRecordsAreValidated) {
  const std::string sha(64, 'c');
  auto promote = [&](json value, json id, json digest) {
    return [=](json& j) {
      j["options"]["kv-cache-dtype"] = "fp8_g128";
      j["promotions"]["kv-cache-dtype"] = {
          {"value", value}, {"receipt_id", id}, {"receipt_sha256", digest}};
    };
  };
  EXPECT_EQ(error_of(promote("fp8_g128", "2026-10-21-fp8-kv-g3", sha)), "");
  const Profile p = Profile::load((dir_ / "tiny.json").string(), "");
  ASSERT_EQ(p.promotions().count("kv-cache-dtype"), 1u);
  EXPECT_EQ(p.promotions().at("kv-cache-dtype").receipt.id, "2026-10-21-fp8-kv-g3");
  EXPECT_EQ(p.promotions().at("kv-cache-dtype").receipt.sha256, sha);
  EXPECT_TRUE(p.unbacked_options().empty());

  EXPECT_NE(
      error_of(promote("bf16", "r1", sha))
          .find(": promotions.kv-cache-dtype.value: bf16 differs from options.kv-cache-dtype = "
                "fp8_g128"),
      std::string::npos);
  EXPECT_NE(error_of(promote("fp8_g128", "R1", sha)).find(": promotions.kv-cache-dtype.receipt_id"),
            std::string::npos);
  EXPECT_NE(
      error_of(promote("fp8_g128", "r1", "abc"))
          .find(": promotions.kv-cache-dtype.receipt_sha256: expected 64 lowercase hex digits"),
      std::string::npos);
  EXPECT_NE(error_of([&](json& j) {
              j["promotions"]["enable-prefix-caching"] = {
                  {"value", true}, {"receipt_id", "r1"}, {"receipt_sha256", sha}};
            }).find(": promotions.enable-prefix-caching: the profile's options do not set"),
            std::string::npos);
  // An option that is not implemented cannot be promoted, even with a receipt. Every option of
  // the `options` section is implemented today, so the check runs on a registry where one is not.
  std::vector<OptionSpec> specs = serving_options().specs();
  for (OptionSpec& s : specs)
    if (s.name == "prefix-cache-gb") s.not_implemented = "no disk tier in this registry";
  const OptionRegistry without_disk_tier(specs);
  EXPECT_NE(error_of(
                [&](json& j) {
                  j["options"]["prefix-cache-gb"] = 8;
                  j["promotions"]["prefix-cache-gb"] = {
                      {"value", 8}, {"receipt_id", "r1"}, {"receipt_sha256", sha}};
                },
                "tiny", without_disk_tier)
                .find(": promotions.prefix-cache-gb: --prefix-cache-gb is not implemented yet"),
            std::string::npos);
}

TEST_F(ProfileFiles, OptionsAwayFromTheDefaultWithoutReceiptAreListed) {
  EXPECT_EQ(error_of([](json& j) {
              j["options"]["kv-cache-dtype"] = "fp8_g128";
              j["options"]["enable-prefix-caching"] = true;
              j["limits"]["max_num_seqs"] = 64;  // limits are sizing, not promoted defaults
            }),
            "");
  const Profile p = Profile::load((dir_ / "tiny.json").string(), "");
  EXPECT_EQ(p.unbacked_options(),
            (std::vector<std::string>{"enable-prefix-caching", "kv-cache-dtype"}));
}

TEST_F(ProfileFiles, RejectedOptionCannotBeTurnedOn) {
  std::vector<OptionSpec> table = serving_options().specs();
  OptionSpec rejected;
  rejected.name = "fused-widgets";
  rejected.type = OptionType::kBool;
  rejected.default_value = rejected.builtin = false;
  rejected.help = "a change that failed G3";
  rejected.status = OptionStatus::kRejected;
  table.push_back(rejected);
  const OptionRegistry registry(table);
  auto with = [&](bool on) {
    json j = {{"name", "tiny"},
              {"description", "d"},
              {"model", "tinyglm"},
              {"precision_mode", "strict"},
              {"limits", {{"max_num_seqs", 2}, {"max_seq_len", 4096}, {"max_prefill_tokens", 512}}},
              {"options", {{"fused_widgets", on}}}};
    return Profile::parse(j.dump(), (dir_ / "tiny.json").string(), registry);
  };
  EXPECT_NO_THROW(with(false));
  try {
    with(true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "tiny.json: options.fused_widgets: fused-widgets was rejected in qualification"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sparkglm
