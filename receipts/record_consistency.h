#pragma once
// What a record says that its own numbers, or the artifacts beside it, contradict. These checks
// need no gate definition: a gate marked pass with a failing (or no) criterion, a fail with none
// failing; a metric whose median, min, max or n is not what its samples give; a timestamp that is
// no time, lies in the future, or runs backwards (created_at, attestation.date, and every request
// of requests.jsonl: start <= first output <= end, events in order inside the request); an arm's
// effective-config.json or identity.json, or a workload spec, whose bytes do not match the sha256
// or identity the record states. Re-deriving verdicts and metrics from the raw records under the
// gate definitions is the gates layer's part (gates/verdict_rederivation.h).
#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "receipts/problem.h"

namespace sparkglm::receipts {

// How far a timestamp may lie ahead of this machine's clock: clocks of the machine that ran and
// the one that verifies disagree by seconds, not by minutes.
inline constexpr double kClockSkewS = 300;

// Every contradiction, each naming the field of qualification.json or the artifact. `bundle` is
// the folder; `intact` the artifacts present and unchanged: any other is already a problem of the
// verifier, and is not read here.
Problems check_consistency(const std::filesystem::path& bundle, const nlohmann::json& record,
                           const std::set<std::string>& intact);

// "YYYY-MM-DDTHH:MM:SS[.f]Z" as seconds since the epoch; false when it is not a real UTC time
// (month 13, February 30, hour 24 ...).
bool parse_utc(const std::string& text, double* seconds);

}  // namespace sparkglm::receipts
