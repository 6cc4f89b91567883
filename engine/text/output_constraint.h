#pragma once
// What a request asks its output to be, as the server parsed it from `response_format`, vLLM's
// `structured_outputs` / `guided_json` / `guided_choice`, or a forced tool call (`tool_choice`
// "required" or named). The grammar compiler (engine/text/grammar) turns it into a per-step token
// mask; this header is the only thing the server and the grammar share.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm {

struct OutputConstraint {
  enum class Kind {
    kNone,        // unconstrained text
    kJsonObject,  // any JSON object (`response_format: {"type": "json_object"}`)
    kJsonSchema,  // a JSON value valid under `schema` (`json_schema`, `guided_json`)
    kChoice,      // exactly one of `choices` (`guided_choice`, `structured_outputs.choice`)
    // One or more GLM tool calls, as the chat template renders them (`tool_choice` "required" or
    // named):
    // <tool_call>{name}<arg_key>{key}</arg_key><arg_value>{value}</arg_value>...</tool_call> with
    // `name` one of `tools`' function names and each value as the template writes it (a string raw,
    // anything else as JSON) under that function's `parameters` schema.
    kToolCall,
  };
  Kind kind = Kind::kNone;
  nlohmann::json schema;             // kJsonSchema: the schema as the client sent it
  std::vector<std::string> choices;  // kChoice
  // kToolCall: the OpenAI function objects ({"name", "parameters", ...}) a call may name; one for
  // a named tool_choice.
  std::vector<nlohmann::json> tools;
  // GLM reasons first: with true the mask applies only after the reasoning section closes.
  bool after_reasoning = false;

  bool active() const { return kind != Kind::kNone; }
};

}  // namespace sparkglm
