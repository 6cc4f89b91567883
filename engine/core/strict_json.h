#pragma once
// JSON from files people write (profiles, receipts): a key repeated within one object is an error,
// where a plain parse would silently keep one of the values.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"

namespace sparkglm {

// Throws Error(kind, "<where>: not valid JSON: ...") or Error(kind, "<where>: key \"k\" appears
// twice").
nlohmann::json parse_json_unique_keys(std::string_view bytes, const std::string& where,
                                      ErrorKind kind);

}  // namespace sparkglm
