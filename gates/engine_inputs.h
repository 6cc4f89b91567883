#pragma once
// The inputs of `sparkglm-qualify measure`: runner-bench files ("sparkglm.runner_bench/1") and a
// PyTorch peer ("sparkglm.torch_peer/1"), checked field by field, and the lookups the judging
// code uses on them.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace sparkglm::gates {

// Throws Error(kInvalidArgument) naming the file and the field ("cells[1].median_ms: expected a
// positive number") when a file is not what its schema says.
void check_runner_bench(const nlohmann::json& bench, const std::string& file);
void check_torch_peer(const nlohmann::json& peer, const std::string& file);

// prefill_8k and prefill_8192 name one cell (the runner bench writes the first, the peer the
// second); this maps both to the second.
std::string canonical_cell(const std::string& name);

// The cell `name` (and `mode`, when given) of a bench or peer document, or null.
const nlohmann::json* find_cell(const nlohmann::json& doc, const std::string& name,
                                const std::string& mode = "");

// A cell that ran (not null and not skipped).
bool measured(const nlohmann::json* cell);

// The file as JSON; Error(kInvalidArgument) naming `flag` and the path when it is not.
nlohmann::json read_json(const std::filesystem::path& path, const std::string& flag);

}  // namespace sparkglm::gates
