#pragma once
// One arm's identity (ARCHITECTURE.md, "Identity"): the binary's --version fields and sha256, the
// profile and effective-configuration sha256 and the model identity, all read from what the
// server itself printed at start. qualification.json's change.baseline / change.candidate.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::harness {

struct ServerIdentity {
  nlohmann::json identity;          // the change.<arm> object of qualification.json
  nlohmann::json effective_config;  // the server's effective configuration
};

// `argv` is the server's command line (argv[0] the binary); `log_text` its log after start.
// Throws Error naming what the log lacked.
ServerIdentity read_server_identity(const std::string& label, const std::vector<std::string>& argv,
                                    const std::string& log_text);

// sha256 of a file's bytes, streamed.
std::string file_sha256(const std::string& path);

}  // namespace sparkglm::harness
