#include "engine/server/openai_constraint.h"

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/server/api_error.h"

namespace sparkglm::server {

using nlohmann::json;

namespace {

// The member, or nullptr where it is absent or null.
const json* member(const json& object, const char* name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::vector<std::string> read_choices(const json& v, const std::string& name) {
  if (!v.is_array() || v.empty()) throw ApiError::wrong_type(name, "a non-empty array of strings");
  std::vector<std::string> choices;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string())
      throw ApiError::wrong_type(name + "[" + std::to_string(i) + "]", "a string");
    choices.push_back(v[i].get<std::string>());
  }
  return choices;
}

// A schema: an object, or a string holding one (vLLM takes both for guided_json).
json read_schema(const json& v, const std::string& name) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    json parsed;
    try {
      parsed = parse_json(v.get_ref<const std::string&>(), name, ErrorKind::kInvalidArgument,
                          json_limits::kRequestEmbedded);
    } catch (const Error& e) {
      throw ApiError::invalid_request(e.message(), name);
    }
    if (parsed.is_object()) return parsed;
  }
  throw ApiError::wrong_type(name, "a JSON Schema object");
}

OutputConstraint from_response_format(const json& format) {
  OutputConstraint c;
  if (!format.is_object()) throw ApiError::wrong_type("response_format", "an object");
  const json* type = member(format, "type");
  if (!type || !type->is_string())
    throw ApiError::wrong_type("response_format.type",
                               "one of \"text\", \"json_object\", \"json_schema\"");
  if (*type == "text") return c;
  if (*type == "json_object") {
    c.kind = OutputConstraint::Kind::kJsonObject;
    return c;
  }
  if (*type != "json_schema")
    throw ApiError::invalid_request("`response_format.type` " + type->dump() +
                                        " is not supported: one of \"text\", \"json_object\", "
                                        "\"json_schema\"",
                                    "response_format.type");
  const json* spec = member(format, "json_schema");
  if (!spec || !spec->is_object())
    throw ApiError::wrong_type("response_format.json_schema", "an object with `name` and `schema`");
  if (const json* name = member(*spec, "name"); name && !name->is_string())
    throw ApiError::wrong_type("response_format.json_schema.name", "a string");
  if (const json* strict = member(*spec, "strict"); strict && !strict->is_boolean())
    throw ApiError::wrong_type("response_format.json_schema.strict", "true or false");
  const json* schema = member(*spec, "schema");
  if (!schema)
    throw ApiError::invalid_request("`response_format.json_schema.schema` is required",
                                    "response_format.json_schema.schema");
  // strict false asks for less than this server gives: the output is held to the schema anyway.
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.schema = read_schema(*schema, "response_format.json_schema.schema");
  return c;
}

OutputConstraint from_structured_outputs(const json& so) {
  if (!so.is_object()) throw ApiError::wrong_type("structured_outputs", "an object");
  OutputConstraint c;
  int given = 0;
  for (auto it = so.begin(); it != so.end(); ++it) {
    if (it->is_null()) continue;
    const std::string field = "structured_outputs." + it.key();
    if (it.key() == "json") {
      c.kind = OutputConstraint::Kind::kJsonSchema;
      c.schema = read_schema(*it, field);
    } else if (it.key() == "choice") {
      c.kind = OutputConstraint::Kind::kChoice;
      c.choices = read_choices(*it, field);
    } else if (it.key() == "json_object") {
      if (!it->is_boolean()) throw ApiError::wrong_type(field, "true or false");
      if (!it->get<bool>()) continue;
      c.kind = OutputConstraint::Kind::kJsonObject;
    } else if (it.key() == "regex" || it.key() == "grammar" || it.key() == "structural_tag") {
      throw ApiError::invalid_request(
          "`" + field +
              "` is not supported: this server's grammar takes JSON Schema (json, "
              "json_object) and choice only",
          field);
    } else {
      throw ApiError::invalid_request("`" + field + "` is not a field this server reads", field);
    }
    ++given;
  }
  if (given > 1)
    throw ApiError::invalid_request("`structured_outputs` takes one of json, choice, json_object",
                                    "structured_outputs");
  return c;
}

}  // namespace

OutputConstraint read_output_constraint(const json& body, std::string* field) {
  OutputConstraint c;
  std::string from;
  auto take = [&](OutputConstraint next, const std::string& name) {
    if (!next.active()) return;
    if (c.active())
      throw ApiError::invalid_request(
          "`" + name + "` and `" + from + "` both constrain the output: give one", name);
    c = std::move(next);
    from = name;
  };
  if (const json* format = member(body, "response_format"))
    take(from_response_format(*format), "response_format");
  if (const json* so = member(body, "structured_outputs"))
    take(from_structured_outputs(*so), "structured_outputs");
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (!it.key().starts_with("guided_") || it->is_null()) continue;
    OutputConstraint next;
    if (it.key() == "guided_json") {
      next.kind = OutputConstraint::Kind::kJsonSchema;
      next.schema = read_schema(*it, it.key());
    } else if (it.key() == "guided_choice") {
      next.kind = OutputConstraint::Kind::kChoice;
      next.choices = read_choices(*it, it.key());
    } else {
      throw ApiError::invalid_request("`" + it.key() +
                                          "` is not supported: of vLLM's guided_* fields this "
                                          "server reads guided_json and guided_choice",
                                      it.key());
    }
    take(std::move(next), it.key());
  }
  if (field) *field = from;
  return c;
}

ToolChoice read_tool_choice(const json& body, const std::vector<json>& tools) {
  ToolChoice choice;
  const json* v = member(body, "tool_choice");
  if (!v) return choice;
  const char* expected =
      "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (v->is_string()) {
    if (*v == "auto") return choice;
    if (*v == "none") {
      choice.mode = ToolChoice::Mode::kNone;
      return choice;
    }
    if (*v != "required") throw ApiError::wrong_type("tool_choice", expected);
    choice.mode = ToolChoice::Mode::kRequired;
  } else if (v->is_object()) {
    const json* type = member(*v, "type");
    const json* function = member(*v, "function");
    if (!type || *type != "function" || !function || !function->is_object())
      throw ApiError::wrong_type("tool_choice", expected);
    const json* name = member(*function, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>().empty())
      throw ApiError::wrong_type("tool_choice.function.name", "a non-empty string");
    choice.mode = ToolChoice::Mode::kNamed;
    choice.name = name->get<std::string>();
    bool known = false;
    for (const json& tool : tools) known = known || tool["function"]["name"] == choice.name;
    if (!known)
      throw ApiError::invalid_request(
          "`tool_choice` names the function \"" + choice.name + "\", which `tools` does not list",
          "tool_choice");
  } else {
    throw ApiError::wrong_type("tool_choice", expected);
  }
  if (tools.empty())
    throw ApiError::invalid_request("`tool_choice` forces a tool call but `tools` is empty",
                                    "tool_choice");
  return choice;
}

OutputConstraint tool_call_constraint(const ToolChoice& choice, const std::vector<json>& tools) {
  OutputConstraint c;
  if (choice.mode != ToolChoice::Mode::kRequired && choice.mode != ToolChoice::Mode::kNamed)
    return c;
  c.kind = OutputConstraint::Kind::kToolCall;
  for (const json& tool : tools)
    if (choice.mode == ToolChoice::Mode::kRequired || tool["function"]["name"] == choice.name)
      c.tools.push_back(tool["function"]);
  return c;
}

}  // namespace sparkglm::server
