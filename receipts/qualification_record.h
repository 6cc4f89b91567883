#pragma once
// qualification.json as a parsed record: its structural rules (docs/qualification-bundle.md, and
// its machine-readable twin receipts/qualification.schema.json) and the few names the bundle
// tools share. Structure only: whether the files it lists exist and match is the verifier's job.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "receipts/problem.h"

namespace sparkglm::receipts {

inline constexpr const char* kRecordSchema = "sparkglm.qualification/1";
inline constexpr const char* kManifestName = "qualification.json";

// Parses qualification.json, refusing a key repeated within one object (a plain parse would keep
// one of the values silently, and a verifier and a renderer might keep different ones). Throws
// Error naming `name` and what is malformed.
nlohmann::json parse_record_text(std::string_view bytes, const std::string& name);

// The bytes qualification.json holds for `record`: nlohmann's dump(2) and a newline. The writer,
// `sign` and the tests all write through this one function.
std::string record_file_text(const nlohmann::json& record);

// Every structural problem of `record`: missing fields, wrong types, values outside their enum or
// pattern, and the single-arm rules. `where` is the JSON path, e.g. "change.candidate.commit".
Problems check_record(const nlohmann::json& record);

// ^[a-z0-9][a-z0-9._-]*$
bool is_bundle_id(const std::string& id);
// 64 lowercase hex digits.
bool is_sha256_hex(const std::string& text);
// A relative path inside a bundle: forward slashes, no leading '/', no empty, "." or ".."
// component, no backslash or control character. On failure `why` says which rule it breaks.
bool is_artifact_path(const std::string& path, std::string* why);
// "G0".."G5" -> 0..5; -1 for anything else.
int level_number(const std::string& level);
// The artifact kinds of the contract's file table.
const std::vector<std::string>& artifact_kinds();

}  // namespace sparkglm::receipts
