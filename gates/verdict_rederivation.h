#pragma once
// The verifier's judge: every gate a record marks `pass` is judged again from the bundle's raw
// records under the gate definitions of gates/, and every metric is computed again from
// requests.jsonl; what the record says is only compared with the result, never believed.
//
//   G0          a statement about the repository when the run was made (CI re-runs it on every
//               commit); its criteria must be the definition's, each passed
//   G1          judge_operator_table over the bundle's operators.json
//   G2, G3, G4  evaluate_serving_gate over requests.jsonl and the bundle's workload specs
//               (scaled as the record says), planned again without a server; a G2 of a
//               `measure` bundle (no requests, runner-bench files) by judge_engine_targets
//               a quality bundle (`quality --out`, a "quality" object) by rederive_quality
//               (gates/quality_bundle.h): its bindings, scores, metrics and gate
//   G5          runs on target hardware with no raw record defined here: a pass cannot re-derive
//
// A gate marked fail, not-run or not-applicable claims nothing and is checked for consistency
// only (receipts/record_consistency.h). A pass is re-derived under the current definition, then
// under each superseded one kept in gates/history/ (content-addressed, committed when a definition
// changes): a verdict no reviewed definition yields does not verify. A metric whose name the
// project no longer computes (renamed since the bundle was written) is left as written; every
// other metric must equal what case_metrics computes from requests.jsonl.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/gate_definition.h"
#include "harness/request_record.h"
#include "receipts/bundle_verifier.h"
#include "receipts/problem.h"

namespace sparkglm::gates {

// A receipts::VerdictCheck: the problems of every verdict and metric that does not re-derive.
receipts::Problems rederive_verdicts(const std::filesystem::path& bundle,
                                     const nlohmann::json& record,
                                     const receipts::VerifyOptions& options);

// Equal, numbers up to the last bits a decimal round trip may lose (objects and arrays member by
// member): how a recorded number is compared with the one derived again.
bool close_json(const nlohmann::json& a, const nlohmann::json& b);

// A bundle's one recorded gate against the one judged again from `judged_from` (the raw record it
// carries), whatever the status: the status, then each criterion in order. Problems name `at`.
receipts::Problems compare_judged_gate(const nlohmann::json& recorded, const GateResult& derived,
                                       const std::string& at, const std::string& judged_from);

// A bundle judged by G2 again under each of `definitions` (the current one first, then those of
// gates/history/): no problems under the first that re-derives it, else the problems under the
// first that could judge it. `judge` returns nullopt for a definition without the targets it
// needs; `needs` names them ("quality_targets") for when none has them.
template <typename Judge>
receipts::Problems under_first_definition(const std::vector<GateDefinition>& definitions,
                                          const Judge& judge, const std::string& needs) {
  std::optional<receipts::Problems> closest;
  for (const GateDefinition& d : definitions) {
    std::optional<receipts::Problems> found = judge(d);
    if (!found) continue;
    if (found->empty()) return {};
    if (!closest) closest = std::move(found);
  }
  if (closest) return *closest;
  return {{"qualification.json: gates[0]",
           "no G2 definition (current or in gates/history/) has " + needs + " to judge it by"}};
}

// The records of a bundle's requests.jsonl, in order; Error naming the line that does not read.
std::vector<harness::RequestRecord> read_requests(const std::filesystem::path& bundle);

// VerifyOptions with rederive_verdicts, the trusted keys and gate definitions of a checkout.
receipts::VerifyOptions full_verification(
    const std::filesystem::path& trusted_keys = receipts::kTrustedKeysFolder,
    const std::filesystem::path& gates = "gates");

}  // namespace sparkglm::gates
