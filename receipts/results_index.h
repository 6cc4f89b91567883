#pragma once
// receipts/index.json: every committed bundle under receipts/results/ with the sha256 of its
// qualification.json, sorted by id. `index` writes it; `verify-all` checks every bundle and that
// the committed index is exactly what `index` would write, so that no bundle is added, edited or
// removed without the index saying so.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "receipts/bundle_verifier.h"
#include "receipts/problem.h"

namespace sparkglm::receipts {

inline constexpr const char* kIndexSchema = "sparkglm.receipts-index/1";
inline constexpr const char* kIndexName = "index.json";
inline constexpr const char* kResultsFolder = "results";

// The index of `receipts` (the folder holding results/ and index.json). Throws Error naming the
// bundle whose qualification.json cannot be read or lacks a field the index carries.
nlohmann::json build_index(const std::filesystem::path& receipts);

// The bytes index.json holds: dump(2) and a newline.
std::string index_file_text(const nlohmann::json& index);

// `index`: writes receipts/index.json atomically; returns what it wrote.
nlohmann::json write_index(const std::filesystem::path& receipts);

// How the committed index.json differs from what `index` would write, naming each bundle that is
// missing from it, listed but absent, or listed differently; empty when fresh.
Problems stale_index_problems(const std::filesystem::path& receipts);

// `verify-all`: every bundle under results/ (problems prefixed "results/<folder>/"), anything in
// results/ that is not a bundle folder, and a stale index.
Problems verify_all(const std::filesystem::path& receipts, const VerifyOptions& options = {});

}  // namespace sparkglm::receipts
