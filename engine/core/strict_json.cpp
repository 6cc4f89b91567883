#include "engine/core/strict_json.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/bounded_file.h"

namespace sparkglm {

void check_json_bounds(std::string_view bytes, const std::string& where, ErrorKind kind,
                       JsonLimits limits) {
  if (bytes.size() > limits.max_bytes)
    throw Error(kind, where + ": JSON larger than " + std::to_string(limits.max_bytes) +
                          " bytes (got " + std::to_string(bytes.size()) + ")");
  // Brackets inside strings do not nest. On valid JSON this count equals the parser's depth at
  // every byte; on invalid JSON the two agree up to the first error, where the parser stops, so the
  // parser never goes deeper than this scan has already allowed.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot close the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.max_depth)
        throw Error(kind, where + ": JSON nested deeper than " + std::to_string(limits.max_depth) +
                              " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

namespace {

template <class Json>
Json parse_bounded(std::string_view bytes, const std::string& where, ErrorKind kind,
                   JsonLimits limits) {
  check_json_bounds(bytes, where, kind, limits);
  try {
    return Json::parse(bytes.begin(), bytes.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    throw Error(kind, where + ": not valid JSON: " + e.what());
  }
}

}  // namespace

nlohmann::json parse_json(std::string_view bytes, const std::string& where, ErrorKind kind,
                          JsonLimits limits) {
  return parse_bounded<nlohmann::json>(bytes, where, kind, limits);
}

nlohmann::ordered_json parse_ordered_json(std::string_view bytes, const std::string& where,
                                          ErrorKind kind, JsonLimits limits) {
  return parse_bounded<nlohmann::ordered_json>(bytes, where, kind, limits);
}

nlohmann::json parse_json_unique_keys(std::string_view bytes, const std::string& where,
                                      ErrorKind kind, JsonLimits limits) {
  using json = nlohmann::json;
  check_json_bounds(bytes, where, kind, limits);
  std::vector<std::set<std::string>> open;  // the keys seen in each object being parsed
  std::string repeated;
  const json::parser_callback_t watch = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open.emplace_back();
    if (event == json::parse_event_t::object_end) open.pop_back();
    if (event == json::parse_event_t::key &&
        !open.back().insert(parsed.get<std::string>()).second && repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  json j;
  try {
    j = json::parse(bytes.begin(), bytes.end(), watch);
  } catch (const json::exception& e) {
    throw Error(kind, where + ": not valid JSON: " + e.what());
  }
  if (!repeated.empty()) throw Error(kind, where + ": key \"" + repeated + "\" appears twice");
  return j;
}

std::string read_json_text(const std::string& path, ErrorKind kind, JsonLimits limits) {
  using Problem = BoundedFile::Problem;
  BoundedFile f = read_bounded_file(path, limits.max_bytes);
  switch (f.problem) {
    case Problem::kNone:
      return std::move(f.bytes);
    case Problem::kStat:
      throw Error(ErrorKind::kIo, "cannot read " + path + ": " + f.detail);
    case Problem::kNotRegular:
      throw Error(ErrorKind::kIo, "cannot read " + path + ": not a regular file");
    case Problem::kTooLarge:
      throw Error(kind, path + ": " + std::to_string(f.size) + " bytes, larger than the limit of " +
                            std::to_string(limits.max_bytes) + " bytes for this JSON file");
    case Problem::kOpen:
    case Problem::kRead:
      break;
  }
  throw Error(ErrorKind::kIo, "cannot read " + path);
}

nlohmann::json parse_json_file(const std::string& path, ErrorKind kind, JsonLimits limits) {
  return parse_json(read_json_text(path, kind, limits), path, kind, limits);
}

}  // namespace sparkglm
