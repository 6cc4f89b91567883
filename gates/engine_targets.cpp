#include "gates/engine_targets.h"

#include <cmath>
#include <utility>

#include "engine/core/error.h"

namespace sparkglm::gates {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::kInvalidConfig, where + ": " + what);
}

EngineTarget target(const json& j, const std::string& where) {
  if (!j.is_object() || j.size() != 1)
    bad(where, "expected {\"at_least\": x} or {\"above\": x}, got " + j.dump());
  const auto only = j.begin();
  const std::string key = only.key();
  const json& value = only.value();
  if (key != "at_least" && key != "above")
    bad(where, "expected \"at_least\" or \"above\", got \"" + key + "\"");
  if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0)
    bad(where + "." + key, "expected a positive number, got " + value.dump());
  return {value.get<double>(), key == "above"};
}

}  // namespace

EngineTargets parse_engine_targets(const json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "expected an object");
  EngineTargets t;
  const std::pair<const char*, EngineTarget*> fields[] = {
      {"c1_decode_fraction_of_floor", &t.c1_decode_fraction_of_floor},
      {"c8_over_c1_decode", &t.c8_over_c1_decode},
      {"prefill_8k_fraction_of_floor", &t.prefill_8k_fraction_of_floor},
      {"c1_decode_over_torch_eager", &t.c1_decode_over_torch_eager},
      {"c1_decode_over_torch_compile", &t.c1_decode_over_torch_compile},
      {"cells_over_torch", &t.cells_over_torch}};
  for (const auto& [key, value] : j.items()) {
    bool known = key == "preset" || key == "note";
    for (const auto& [name, field] : fields) known = known || key == name;
    if (!known) bad(where + "." + key, "not an engine target");
  }
  if (!j.contains("preset") || !j["preset"].is_string() || j["preset"].get<std::string>().empty())
    bad(where + ".preset", "expected the preset's name");
  t.preset = j["preset"].get<std::string>();
  if (j.contains("note") && !j["note"].is_string()) bad(where + ".note", "expected a string");
  for (const auto& [name, field] : fields) {
    if (!j.contains(name)) bad(where + "." + name, "missing");
    *field = target(j[name], where + "." + name);
  }
  return t;
}

}  // namespace sparkglm::gates
