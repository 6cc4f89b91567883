#pragma once
// Recipes are published text, yet a command line copied from a terminal can still carry a key
// (`--api-key=sk-...`, `HF_TOKEN=hf_...`). Whatever the operator tool writes (a profile's
// provenance, engine.json) or prints keeps the flag or variable name and replaces its value with
// "<redacted>", so the record still says a key was there without saying which.
#include <string>
#include <vector>

namespace sparkglm::operator_tool {

inline constexpr const char* kRedacted = "<redacted>";

// Whether a flag name ("api-key", "--hf-token") or an environment key ("OPENAI_API_KEY") names a
// secret: by its words (token, secret, password, credential, auth..., "api key", "access key"),
// so "max-num-batched-tokens" and "TOKENIZERS_PARALLELISM" are not secrets; nor is a name that
// says where a secret is ("api-key-file", "api-key-env", "HF_TOKEN_PATH").
bool is_secret_name(const std::string& name);

// An argv with every secret value replaced: "--api-key=K" -> "--api-key=<redacted>", "--api-key K"
// -> "--api-key <redacted>", "HF_TOKEN=x" -> "HF_TOKEN=<redacted>".
std::vector<std::string> redact_argv(const std::vector<std::string>& argv);

// The same over free text (notes, skipped environment lines), word by word; the whitespace
// between words is kept.
std::string redact_text(const std::string& text);

}  // namespace sparkglm::operator_tool
