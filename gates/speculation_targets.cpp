#include "gates/speculation_targets.h"

#include <cmath>
#include <cstdint>

#include "engine/core/error.h"

namespace sparkglm::gates {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kInvalidConfig, where + ": " + what);
}

std::string text(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
    bad(where + "." + key, "expected a non-empty string");
  return j[key].get<std::string>();
}

}  // namespace

json SpeculationTargets::to_json() const {
  json j = {{"checkpoint", checkpoint},
            {"device", device},
            {"concurrency", concurrency},
            {"min_speedup", min_speedup}};
  if (min_prompts) j["min_prompts"] = *min_prompts;  // as the definition states it, or not at all
  return j;
}

SpeculationTargets parse_speculation_targets(const json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "expected an object");
  for (const auto& [key, value] : j.items())
    if (key != "note" && key != "checkpoint" && key != "device" && key != "concurrency" &&
        key != "min_prompts" && key != "min_speedup")
      bad(where + "." + key, "not a speculation target");
  if (j.contains("note") && !j["note"].is_string()) bad(where + ".note", "expected a string");
  SpeculationTargets t;
  t.checkpoint = text(j, "checkpoint", where);
  t.device = text(j, "device", where);
  if (!j.contains("concurrency") || !j["concurrency"].is_number_integer() ||
      j["concurrency"].get<int64_t>() < 1 || j["concurrency"].get<int64_t>() > 1024)
    bad(where + ".concurrency", "expected an integer in 1..1024");
  t.concurrency = j["concurrency"].get<int>();
  if (j.contains("min_prompts")) {
    if (!j["min_prompts"].is_number_integer() || j["min_prompts"].get<int64_t>() < 1 ||
        j["min_prompts"].get<int64_t>() > 4096)
      bad(where + ".min_prompts", "expected an integer in 1..4096");
    t.min_prompts = j["min_prompts"].get<int>();
  }
  if (!j.contains("min_speedup") || !j["min_speedup"].is_number() ||
      !std::isfinite(j["min_speedup"].get<double>()) || !(j["min_speedup"].get<double>() > 0))
    bad(where + ".min_speedup", "expected a positive number");
  t.min_speedup = j["min_speedup"].get<double>();
  return t;
}

}  // namespace sparkglm::gates
