#include "engine/core/strict_json.h"

#include <set>
#include <vector>

namespace sparkglm {

nlohmann::json parse_json_unique_keys(std::string_view bytes, const std::string& where,
                                      ErrorKind kind) {
  using json = nlohmann::json;
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

}  // namespace sparkglm
