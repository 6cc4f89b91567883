// The `provenance` field engine/options/profile.cpp accepts for imported profiles.
#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/options/profile.h"

namespace sparkglm {
namespace {

std::string profile_with(const std::string& provenance) {
  return R"({"name": "p", "description": "d", "model": "tinyglm-micro", "precision_mode": "strict",
  "limits": {"max_num_seqs": 1, "max_seq_len": 64, "max_prefill_tokens": 16},
  "provenance": )" +
         provenance + "}";
}

TEST(ProfileProvenance, IsAnInertRecordReadBack) {
  const std::string sha(64, 'a');
  const Profile p = Profile::parse(
      profile_with(R"({"source": "https://x/r.json", "sha256": ")" + sha +
                   R"(", "fetched_at": "2026-11-29T20:00:00Z", "max_num_seqs": 99})"),
      "/tmp/p.json");
  EXPECT_EQ(p.provenance()["source"], "https://x/r.json");
  EXPECT_EQ(std::get<int64_t>(p.values().at("max-num-seqs")), 1);  // never read as a setting
}

TEST(ProfileProvenance, IsOptional) {
  const Profile p = Profile::parse(
      R"({"name": "p", "description": "d", "model": "tinyglm-micro", "precision_mode": "strict",
          "limits": {"max_num_seqs": 1, "max_seq_len": 64, "max_prefill_tokens": 16}})",
      "/tmp/p.json");
  EXPECT_TRUE(p.provenance().is_null());
}

TEST(ProfileProvenance, MalformedIdentityFieldsAreNamed) {
  for (const char* bad :
       {R"("text")", R"({"sha256": "xyz"})", R"({"source": 5})", R"({"fetched_at": null})"}) {
    try {
      Profile::parse(profile_with(bad), "/tmp/p.json");
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("provenance"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sparkglm
