#pragma once
// The speculation bundle: speculative decoding's speed and output identity (issue 19) as a receipt,
// from speculation_bench files (gates/speculation_bench_file.h), written by
// `sparkglm-qualify measure --speculation-bench FILE ...` (docs/qualification-bundle.md,
// "Speculation bundles"):
//
//   speculation-bench/<n>.json  (metrics)  each bench file as given, byte for byte
//
// qualification.json holds one G2 gate (judge_speculation, gates/speculation_gate.h, under
// G2.json's speculation_targets), the metrics speculation_metrics gives (per cell: decode tok/s,
// speedup over k = 0, acceptance by draft position, tokens per verify step), and
//   "speculation": {"targets": G2's speculation_targets as judged by,
//                   "files": [{"path", "sha256", "source": the path given}, ...]}.
// The candidate identity (commit, binary, model config, weights, device) is the bench files'.
//
// The verifier believes none of it: the files must be the carried artifacts with the recorded
// sha256 and still parse under the schema; the candidate identity, every metric and the gate
// (status and each criterion, pass or fail) must be what the carried files give under G2's
// speculation_targets (the current definition, then each superseded one in gates/history/), whose
// targets the record must name; and each missed or unjudged target's limitation must be listed.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/gate_definition.h"
#include "gates/speculation_bench_file.h"
#include "gates/speculation_gate.h"
#include "gates/speculation_targets.h"
#include "receipts/problem.h"

namespace sparkglm::gates {

struct SpeculationRequest {
  std::vector<std::filesystem::path> benches;  // --speculation-bench, in order
  std::string title, id;
  std::vector<std::string> notes;  // --limitation
  std::filesystem::path gates;     // G2.json's "speculation_targets" judge
};

// Writes the bundle folder `out` (its name must be request.id) through receipts::BundleWriter and
// returns the record. Throws Error naming the file and field on bad input; nothing is written then.
nlohmann::json write_speculation_bundle(const std::filesystem::path& out,
                                        const SpeculationRequest& request);

// A record that `measure --speculation-bench` wrote: it has a "speculation" member.
bool is_speculation_record(const nlohmann::json& record);

// Everything in a speculation bundle that does not re-derive (see the top of this file); `g2` are
// G2's definitions, the current one first.
receipts::Problems rederive_speculation(const std::filesystem::path& bundle,
                                        const nlohmann::json& record,
                                        const std::vector<GateDefinition>& g2);

}  // namespace sparkglm::gates
