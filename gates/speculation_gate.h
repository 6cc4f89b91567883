#pragma once
// The speculation gate: G2's "speculation_targets" (gates/speculation_targets.h) judged on
// speculation_bench files (gates/speculation_bench_file.h), and the metrics a speculation bundle
// records for them (gates/speculation_bundle.h). Each k >= 1 cell is compared with the k = 0 cell
// of its file, concurrency, rollback and draft_in_step: the same requests in the same process, so
// the ratio of medians is the speedup and equal output hashes show that speculation changed no
// token. Medians are harness::median of the per-repetition samples (the metrics' own).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gates/gate_definition.h"
#include "gates/speculation_bench_file.h"
#include "gates/speculation_targets.h"

namespace sparkglm::gates {

// One criterion per concurrency present, "C<c> greedy output identical across k" (observed: the
// cells whose output_sha256 differs from their k = 0 cell's), and, over the files measured on
// targets.device with targets.checkpoint, "C<c> speedup over k = 0" at targets.concurrency
// (observed: the best median ratio). A file of another device or model is not judged for speed,
// and `limitations` (when given) says so; it also gains one line per missed target.
GateResult judge_speculation(const SpeculationTargets& targets,
                             const std::vector<SpeculationBench>& benches,
                             std::vector<std::string>* limitations = nullptr);

// The record's metrics, single-arm, per cell in file and cell order: decode_tokens_per_s (one
// sample per repetition), speedup_over_k0 (k >= 1), acceptance_pos<i> (i = 1 is the first draft)
// and tokens_per_verify_step, in the workload "speculation-bench <model> (<device>)" and the case
// SpeculationCell::case_id() (with "-f<n>" when file n repeats a case of its workload).
nlohmann::json speculation_metrics(const std::vector<SpeculationBench>& benches);

}  // namespace sparkglm::gates
