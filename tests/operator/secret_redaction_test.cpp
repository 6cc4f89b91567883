#include "operator/secret_redaction.h"

#include <gtest/gtest.h>

namespace sparkglm::operator_tool {
namespace {

using Words = std::vector<std::string>;

TEST(SecretRedaction, NamesAreSecretByTheirWordsNotBySubstring) {
  for (const char* secret : {"api-key", "--api-key", "API_KEY", "OPENAI_API_KEY", "hf-token",
                             "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "password", "db-passwd",
                             "client-secret", "aws-access-key", "key", "auth", "GITHUBTOKEN"})
    EXPECT_TRUE(is_secret_name(secret)) << secret;
  for (const char* plain : {"max-num-batched-tokens", "TOKENIZERS_PARALLELISM", "max-tokens",
                            "kv-cache-dtype", "keyboard", "monkey", "NCCL_DEBUG", "author",
                            "api-key-file", "api-key-env", "HF_TOKEN_PATH"})
    EXPECT_FALSE(is_secret_name(plain)) << plain;
}

TEST(SecretRedaction, AnArgvKeepsTheFlagAndHidesTheValue) {
  EXPECT_EQ(redact_argv({"serve", "--api-key=K1", "--api-key", "K2", "HF_TOKEN=K3", "--max-tokens",
                         "7", "--hf-token", "--verbose"}),
            (Words{"serve", "--api-key=<redacted>", "--api-key", "<redacted>",
                   "HF_TOKEN=<redacted>", "--max-tokens", "7", "--hf-token", "--verbose"}));
}

TEST(SecretRedaction, TextKeepsItsSpacing) {
  EXPECT_EQ(redact_text("export  OPENAI_API_KEY=sk-1\n then --api-key sk-2 and --port 80"),
            "export  OPENAI_API_KEY=<redacted>\n then --api-key <redacted> and --port 80");
  EXPECT_EQ(redact_text(""), "");
}

}  // namespace
}  // namespace sparkglm::operator_tool
