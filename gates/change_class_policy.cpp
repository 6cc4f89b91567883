#include "gates/change_class_policy.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "gates/gate_definition.h"
#include "receipts/bundle_file.h"

namespace sparkglm::gates {
namespace {

std::vector<std::string> gate_list(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) throw Error(ErrorKind::kInvalidConfig, where + ": expected an array of gates");
  std::vector<std::string> out;
  for (const auto& g : j) {
    if (!g.is_string() || !is_gate_id(g.get<std::string>()))
      throw Error(ErrorKind::kInvalidConfig, where + ": expected gate ids G0..G5, got " + g.dump());
    out.push_back(g.get<std::string>());
  }
  return out;
}

}  // namespace

ChangeClassPolicy ChangeClassPolicy::load(const std::string& gates_dir) {
  const std::string path = (std::filesystem::path(gates_dir) / "change-classes.json").string();
  const GateFile file = read_gate_file(path);
  const nlohmann::json& j = file.json;
  ChangeClassPolicy p;
  p.sha256_ = file.sha256;
  if (!j.contains("classes") || !j["classes"].is_object() || j["classes"].empty())
    throw Error(ErrorKind::kInvalidConfig, path + ".classes: expected a non-empty object");
  for (const auto& [name, c] : j["classes"].items()) {
    const std::string where = path + ".classes." + name;
    if (!c.is_object()) throw Error(ErrorKind::kInvalidConfig, where + ": expected an object");
    ChangeClass k;
    k.name = name;
    k.required = gate_list(c.value("required", nlohmann::json()), where + ".required");
    k.to_change_default =
        gate_list(c.value("to_change_default", nlohmann::json()), where + ".to_change_default");
    if (!c.contains("numerics_may_move") || !c["numerics_may_move"].is_boolean())
      throw Error(ErrorKind::kInvalidConfig, where + ".numerics_may_move: expected true or false");
    k.numerics_may_move = c["numerics_may_move"].get<bool>();
    p.classes_[name] = k;
  }
  const nlohmann::json options = j.value("options", nlohmann::json::object());
  for (const auto& [option, cls] : options.items()) {
    if (!cls.is_string() || !p.classes_.count(cls.get<std::string>()))
      throw Error(ErrorKind::kInvalidConfig,
                  path + ".options." + option + ": expected the name of a class");
    p.options_[option] = cls.get<std::string>();
  }
  if (!p.options_.count("default"))
    throw Error(ErrorKind::kInvalidConfig, path + ".options.default: missing");
  return p;
}

const ChangeClass& ChangeClassPolicy::at(const std::string& name) const {
  const auto it = classes_.find(name);
  if (it == classes_.end()) {
    std::string known;
    for (const auto& [k, v] : classes_) known += (known.empty() ? "" : ", ") + k;
    throw Error(ErrorKind::kInvalidArgument,
                "unknown change class \"" + name + "\" (known: " + known + ")");
  }
  return it->second;
}

const ChangeClass& ChangeClassPolicy::for_option(const std::string& option) const {
  const auto it = options_.find(option);
  return at(it != options_.end() ? it->second : options_.at("default"));
}

}  // namespace sparkglm::gates
