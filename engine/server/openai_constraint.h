#pragma once
// What a request asks its output to be, read from the body into an OutputConstraint
// (engine/text/output_constraint.h), and which tool calls it allows. The fields:
//
//   response_format      {"type": "text"} | {"type": "json_object"} |
//                        {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//   structured_outputs   vLLM's: {"json": schema} | {"choice": [...]} | {"json_object": true};
//                        regex, grammar and structural_tag are refused (no grammar for them)
//   guided_json          vLLM's legacy spelling of structured_outputs.json
//   guided_choice        ... and of structured_outputs.choice; any other guided_* is refused
//   tool_choice          "auto" | "none" | "required" | {"type": "function", "function": {"name"}}
//
// At most one of response_format (other than text), structured_outputs and guided_* may be given;
// tool_choice "required" or named is a constraint of its own (kToolCall) and excludes them. Every
// problem is an ApiError naming the field. Whether the engine can apply the constraint is the
// routes' question (RouteOptions::admit_constraint); this only reads.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/text/output_constraint.h"

namespace sparkglm::server {

struct ToolChoice {
  enum class Mode {
    kAuto,      // the model may call a tool; calls are parsed out of the content
    kNone,      // no tools are rendered and no calls parsed
    kRequired,  // at least one call, forced by the grammar
    kNamed,     // a call of `name`, forced by the grammar
  };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed
};

// response_format, structured_outputs and guided_*; kNone when none asks for anything. `field`
// (when given) is set to the field the constraint came from.
OutputConstraint read_output_constraint(const nlohmann::json& body, std::string* field = nullptr);

// tool_choice against the request's `tools` (OpenAI tool objects, already checked by the chat
// reader): a named function must be one of them; "required" needs at least one.
ToolChoice read_tool_choice(const nlohmann::json& body, const std::vector<nlohmann::json>& tools);

// The kToolCall constraint "required" or a named choice asks for.
OutputConstraint tool_call_constraint(const ToolChoice& choice,
                                      const std::vector<nlohmann::json>& tools);

}  // namespace sparkglm::server
