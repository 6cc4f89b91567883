#pragma once
// The environment a recipe states, as KEY=VALUE pairs. Publishers write it as a JSON object, a list
// of "K=V" strings, a "K=V K2=V2" string, or prose with the assignments embedded in sentences; the
// prose form is mined for the assignments it states, and what could not be read as one is listed.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm::operator_tool {

struct EnvAssignment {
  std::string key;
  std::string value;
};

struct EnvAssignments {
  std::vector<EnvAssignment> assignments;  // in the order stated, each key once
  // One line per thing not taken: "NCCL_IB_HCA: named without a value", "ATLAS_KV_NVME_GB=<half>:
  // a placeholder, not a value", "X=2: X is already assigned 1".
  std::vector<std::string> skipped;
  std::string form;  // "none", "object", "list", "assignments" or "prose"
};

bool is_env_key(const std::string& key);  // [A-Za-z_][A-Za-z0-9_]*

// `where` names the recipe field in messages. A value of another JSON type (a number) is an error
// of kInvalidConfig naming the field.
EnvAssignments parse_env_assignments(const nlohmann::json& env, const std::string& where);

// The prose form alone: every `KEY=VALUE` with an upper-case KEY at a word boundary.
EnvAssignments extract_prose_assignments(const std::string& text);

}  // namespace sparkglm::operator_tool
