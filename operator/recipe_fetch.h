#pragma once
// Reads a recipe's bytes from a URL (http_get) or a local file, with the same size limit, and
// checks that they are JSON before anything else looks at them.
#include <string>

#include <nlohmann/json.hpp>

#include "operator/http_get.h"

namespace sparkglm::operator_tool {

struct FetchedRecipe {
  std::string source;      // the URL or the absolute path, as recorded in the provenance
  std::string bytes;       // exactly what came back
  std::string sha256;      // of `bytes`
  std::string fetched_at;  // UTC, ISO 8601 ("2026-11-29T20:55:00Z")
  nlohmann::json json;     // `bytes` parsed
};

// Errors: kIo for an unreachable URL, an HTTP error status (with the start of the body), an
// unreadable file, or a body over limits.max_bytes; kInvalidConfig for a body that is not JSON,
// naming the content type and quoting its start.
FetchedRecipe fetch_recipe(const std::string& url_or_path, const HttpLimits& limits);

// At most `max` characters of `bytes`, control bytes escaped: for quoting what came back.
std::string quote_start(const std::string& bytes, size_t max = 80);

}  // namespace sparkglm::operator_tool
