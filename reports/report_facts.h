#pragma once
// The descriptive lines every rendering shows in the same words: what changed, the system, and
// each arm's identity. Kept in one place so the card, the Markdown and the HTML cannot disagree.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::reports {

using Fact = std::pair<std::string, std::string>;  // label, value

// "launcher-profile: kv_cache_dtype = fp8_g128" (or the class alone for a code change).
std::string change_summary(const nlohmann::json& record);
// host, os, cpu, memory, gpus, driver/cuda/nccl, compiler; absent fields are left out.
std::vector<Fact> system_facts(const nlohmann::json& record);
// One line per arm present: "commit af5e772d (clean), binary 1a2b3c4d5e6f, profile 4x1m, ...".
std::vector<Fact> arm_facts(const nlohmann::json& record);
// Each criterion of a gate as "[pass] name: observed X, threshold Y".
std::vector<std::string> criterion_lines(const nlohmann::json& gate);
// The summary table (id, state, level, created, target, change, attestation) and the system table
// (system facts, arm facts, one row per workload) that the Markdown and HTML pages both show.
std::vector<std::vector<std::string>> summary_rows(const nlohmann::json& record);
std::vector<std::vector<std::string>> system_rows(const nlohmann::json& record);
// One row per gate: id, status, summary, and its criteria joined by "; ".
std::vector<std::vector<std::string>> gate_rows(const nlohmann::json& record);
std::vector<std::string> limitations(const nlohmann::json& record);

}  // namespace sparkglm::reports
