#pragma once
// A qualification bundle as the renderers see it: the parsed `qualification.json`, the sha256 of
// its exact bytes (the receipt hash), and the raw request records. Reading never writes into the
// bundle, and a bundle that cannot be read becomes an Error naming the file and the field.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/request_record.h"

namespace sparkglm::reports {

struct BundleView {
  std::filesystem::path dir;
  nlohmann::json record;                         // qualification.json
  std::string qualification_sha256;              // of qualification.json's bytes as stored
  std::vector<harness::RequestRecord> requests;  // requests.jsonl, empty when the file is absent
};

// Throws Error (kIo / kInvalidArgument) naming the file, and for requests.jsonl the line.
BundleView load_bundle(const std::filesystem::path& dir);

// Reads a JSON file of the bundle by relative path; nullopt when it does not exist.
std::optional<nlohmann::json> read_bundle_json(const BundleView& bundle, const std::string& path);

// The value at a dotted path ("change.candidate.model.preset"); nullptr when any step is missing
// or not an object.
const nlohmann::json* find_path(const nlohmann::json& j, std::string_view dotted);

// Text for display: strings as they are, null/missing as `fallback`, other values as compact JSON.
std::string text_at(const nlohmann::json& j, std::string_view dotted,
                    const std::string& fallback = "-");
std::string display(const nlohmann::json* value, const std::string& fallback = "-");

// The bundle's headline: "PASS" when every gate passed or is not applicable (and one passed),
// "FAIL" when any gate failed, "INCOMPLETE" otherwise (a gate not run, or no gates at all).
std::string gate_headline(const nlohmann::json& record);

// True when the record carries a baseline arm (an A/B run rather than a measurement).
bool has_baseline(const nlohmann::json& record);

}  // namespace sparkglm::reports
