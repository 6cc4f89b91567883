#pragma once
// `sparkglm-qualify run --gate GN`: evaluates G0..GN as far as this machine can (the rest are
// `not-run` with the reason), driving one server (a measurement) or two (an A/B, interleaved) with
// the gates' workloads, and writes one bundle that verifies. The harness knows nothing of the
// model; the servers are whatever command lines it is given.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace sparkglm::gates {

struct ArmCommand {
  std::string binary;             // a sparkglm-serve binary
  std::vector<std::string> args;  // its flags (without --port: the harness picks one)
};

// A server already running, measured as it is (`run --url`): nothing is started or stopped.
struct ExternalServer {
  std::string url;          // its base URL, e.g. "http://127.0.0.1:8000"
  std::string api_key_env;  // the environment variable holding its API key ("" = none)
  std::string model;        // the model id to request ("" = the first /v1/models lists)
};

struct RunRequest {
  std::string gate = "G2";
  double scale = 1;
  ArmCommand candidate;
  std::optional<ArmCommand> baseline;      // absent: a single-arm measurement
  std::optional<ExternalServer> external;  // present: measure it instead of starting candidate
  std::string id, title, target;
  std::string state = "measurement";
  std::string change_class = "launcher-profile";
  std::optional<std::pair<std::string, std::string>> option;  // the option under test, name=value
  std::filesystem::path out;  // the bundle folder (must not exist or be empty)
  std::filesystem::path workloads = "workloads", gates = "gates", receipts = "receipts",
                        profiles = "profiles";
  std::filesystem::path ctest_dir;           // G0's unit-test evidence, when given
  std::filesystem::path operators_json;      // G1's operator table, made on a GPU machine
  std::filesystem::path operator_runner;     // G1's runner binary, run when a GPU is present
  int32_t repetitions = 0;                   // > 0 replaces every case's measured repetitions
  std::vector<std::string> extra_workloads;  // measured beside the gates' own; no gate judges them
};

// Runs it, prints progress to `err` and the card to `out`; returns 0 when every evaluated gate
// passed, 1 when one failed, 2 when the run itself could not be made (nothing claims success then).
int run_qualification(const RunRequest& request, std::ostream& out, std::ostream& err);

}  // namespace sparkglm::gates
