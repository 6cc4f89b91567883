// The grammar of GLM tool calls (OutputConstraint::kToolCall: tool_choice "required" or named), as
// the chat template renders them and engine/text/tool_parser.h reads them back:
//
//   <tool_call>NAME[\n](<arg_key>KEY</arg_key>[\n]<arg_value>VALUE</arg_value>[\n])*</tool_call>
//
// one to kMaxCalls calls, optionally separated by a newline. NAME is one of the tools' names; the
// arguments follow the function's `parameters` properties in order, required ones always. A value
// whose schema type admits "string" is raw text (its enum, when all strings, as raw choices);
// any other value is JSON under its schema. Tags are the vocabulary's tag tokens (tag_bytes).
#include <set>
#include <string>

#include "engine/core/error.h"
#include "engine/text/grammar/schema_compiler.h"

namespace sparkglm::grammar {

namespace {

using json = nlohmann::json;
constexpr int kMaxCalls = 8;

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, path + ": " + what);
}

class ToolCallCompiler {
 public:
  ToolCallCompiler(Grammar& g, const TagBytes& tag_bytes) : g_(g), tag_bytes_(tag_bytes) {}

  int32_t compile(const std::vector<json>& tools) {
    if (tools.empty()) refuse("tools", "a forced tool call needs at least one tool");
    Node calls;
    calls.kind = NodeKind::kChoice;
    std::set<std::string> names;
    for (size_t t = 0; t < tools.size(); ++t) {
      const std::string path = "tools[" + std::to_string(t) + "]";
      const json& fn = tools[t].contains("function") ? tools[t]["function"] : tools[t];
      if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string() ||
          fn["name"].get<std::string>().empty())
        refuse(path + ".function.name", "expected a non-empty string");
      const std::string name = fn["name"];
      if (!names.insert(name).second) continue;
      calls.children.push_back(call(name, fn.value("parameters", json::object()), path));
    }
    const int32_t one = add(std::move(calls));
    // More calls: [\n] call, each optional.
    const int32_t more = sequence({{literal("\n"), true}, {one, false}});
    std::vector<std::pair<int32_t, bool>> all = {{one, false}};
    for (int i = 1; i < kMaxCalls; ++i) all.push_back({more, true});
    return sequence(all);
  }

 private:
  int32_t add(Node n) { return add_node(g_, std::move(n), "tools"); }
  int32_t literal(const std::string& bytes) {
    Node n;
    n.kind = NodeKind::kLiteral;
    n.literal = bytes;
    return add(std::move(n));
  }
  int32_t tag(const char* text) {
    const auto bytes = tag_bytes_ ? tag_bytes_(text) : std::nullopt;
    if (!bytes)
      throw Error(ErrorKind::kUnsupported,
                  std::string("tool_choice: the model's vocabulary has no ") + text + " token");
    return literal(*bytes);
  }
  int32_t sequence(const std::vector<std::pair<int32_t, bool>>& parts) {
    Node n;
    n.kind = NodeKind::kSequence;
    for (const auto& [child, optional] : parts) {
      n.children.push_back(child);
      n.optional.push_back(optional);
    }
    return add(std::move(n));
  }

  int32_t call(const std::string& name, const json& params, const std::string& path) {
    if (!params.is_object()) refuse(path + ".function.parameters", "expected a JSON schema object");
    std::vector<std::pair<int32_t, bool>> parts = {
        {tag("<tool_call>"), false}, {literal(name), false}, {literal("\n"), true}};
    std::set<std::string> required;
    for (const auto& r : params.value("required", json::array()))
      if (r.is_string()) required.insert(r.get<std::string>());
    const json props = params.value("properties", json::object());
    if (!props.is_object()) refuse(path + ".function.parameters.properties", "expected an object");
    for (const auto& [key, schema] : props.items()) {
      const std::string p = path + ".function.parameters.properties." + key;
      // Compiled as JSON either way: that validates its keywords.
      const int32_t as_json = compile_schema_node(g_, params, schema, p);
      bool raw_empty = false;
      const int32_t value = string_typed(schema) ? raw_value(schema, raw_empty) : as_json;
      const int32_t arg = sequence({{tag("<arg_key>"), false},
                                    {literal(key), false},
                                    {tag("</arg_key>"), false},
                                    {literal("\n"), true},
                                    {tag("<arg_value>"), false},
                                    {value, raw_empty},
                                    {tag("</arg_value>"), false},
                                    {literal("\n"), true}});
      parts.push_back({arg, required.count(key) == 0});
    }
    parts.push_back({tag("</tool_call>"), false});
    return sequence(parts);
  }

  static bool string_typed(const json& schema) {
    if (!schema.is_object() || !schema.contains("type")) return false;
    const json& t = schema["type"];
    if (t.is_string()) return t == "string";
    if (t.is_array())
      for (const auto& x : t)
        if (x == "string") return true;
    return false;
  }
  // Raw text: a choice of the enum's strings, or any text within min/maxLength. `may_be_empty`:
  // the value can be nothing at all (then the sequence skips it).
  int32_t raw_value(const json& schema, bool& may_be_empty) {
    if (schema.contains("enum") && schema["enum"].is_array()) {
      Node c;
      c.kind = NodeKind::kChoice;
      for (const auto& v : schema["enum"])
        if (v.is_string()) {
          if (v.get<std::string>().empty())
            may_be_empty = true;
          else
            c.children.push_back(literal(v.get<std::string>()));
        }
      if (!c.children.empty()) return add(std::move(c));
    }
    Node s;
    s.kind = NodeKind::kString;
    s.raw = true;
    s.min_length = int32_t(schema.value("minLength", int64_t(0)));
    s.max_length = int32_t(schema.value("maxLength", int64_t(-1)));
    may_be_empty = s.min_length == 0;
    return add(std::move(s));
  }

  Grammar& g_;
  const TagBytes& tag_bytes_;
};

}  // namespace

int32_t compile_tool_calls(Grammar& g, const std::vector<nlohmann::json>& tools,
                           const TagBytes& tag_bytes) {
  return ToolCallCompiler(g, tag_bytes).compile(tools);
}

}  // namespace sparkglm::grammar
