#pragma once
// A published inference recipe, read from its JSON whatever the publisher called the fields: the
// serve command (a shell-like string or an argv list), the environment, the model repository and
// revision, quantization, context length, concurrency, hardware and notes. Only the command is
// required; a field not understood is listed, never an error.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/env_assignments.h"

namespace sparkglm::operator_tool {

struct Recipe {
  std::string id;                    // "id" / "slug": the default profile name
  std::string title;                 // "title" / "name"
  std::vector<std::string> command;  // argv of the serve command, split like a shell would
  std::string command_field;         // where it was found ("inference.command")
  EnvAssignments env;
  std::string env_field;  // "" when the recipe states no environment
  std::string model_repo, model_revision, quantization;
  std::optional<int64_t> context_length, concurrency;
  nlohmann::json hardware;  // as written (null when absent)
  nlohmann::json engine;    // the publisher's engine name/version, as written
  std::string notes;
  std::string published_at;                // the recipe's own "source" / "url" field
  std::vector<std::string> unread_fields;  // top-level fields none of the above took
};

// Errors name the recipe (`where`) and the field: kInvalidConfig for a missing or malformed serve
// command; kInvalidArgument (from split_shell_words) for shell operators in it.
Recipe parse_recipe(const nlohmann::json& root, const std::string& where);

}  // namespace sparkglm::operator_tool
