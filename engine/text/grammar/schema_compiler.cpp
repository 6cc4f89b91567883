#include "engine/text/grammar/schema_compiler.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "engine/core/error.h"
#include "engine/text/grammar/byte_automaton.h"

namespace sparkglm::grammar {
namespace {

using json = nlohmann::json;

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "response schema " + path + ": " + what);
}

const std::set<std::string>& ignored_keywords() {
  static const std::set<std::string> k = {"title",    "description", "default",  "examples",
                                          "$schema",  "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly",   "$defs",    "definitions"};
  return k;
}

const std::set<std::string>& supported_keywords() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "$ref"};
  return k;
}

class SchemaCompiler {
 public:
  // Adds nodes to `g`; `root_schema` is what "#/$defs/..." references resolve against.
  SchemaCompiler(const json& root_schema, Grammar& g)
      : root_schema_(root_schema), limits_(g.limits), g_(g) {}

  int32_t compile_root() { return compile(root_schema_, "$", 0); }
  int32_t compile_at(const json& s, const std::string& path) { return compile(s, path, 0); }
  int32_t compile_free_object() { return free_object(0); }
  int32_t compile_choices(const std::vector<std::string>& choices) {
    if (choices.empty()) refuse("choice", "expected at least one choice");
    Node c;
    c.kind = NodeKind::kChoice;
    std::set<std::string> seen;
    for (const auto& s : choices) {
      if (s.empty()) refuse("choice", "a choice is the empty string");
      if (seen.insert(s).second) c.children.push_back(literal(s, "choice"));
    }
    return add(std::move(c), "choice");
  }

 private:
  int32_t add(Node n, const std::string& path) { return add_node(g_, std::move(n), path); }
  int32_t literal(const std::string& bytes, const std::string& path) {
    literal_bytes_ += int64_t(bytes.size());
    if (literal_bytes_ > limits_.max_literal_bytes)
      refuse(path, "keys, consts and enum values exceed " +
                       std::to_string(limits_.max_literal_bytes) + " bytes (the limit)");
    Node n;
    n.kind = NodeKind::kLiteral;
    n.literal = bytes;
    return add(std::move(n), path);
  }
  // Any JSON value at free-form depth `depth`; objects and arrays only below the depth limit.
  int32_t free_value(int depth) {
    if (auto it = free_values_.find(depth); it != free_values_.end()) return it->second;
    Node c;
    c.kind = NodeKind::kChoice;
    const int32_t id = add(c, "$");
    free_values_[depth] = id;
    std::vector<int32_t> kids;
    if (depth < limits_.free_value_depth) {
      kids.push_back(free_object(depth));
      Node a;
      a.kind = NodeKind::kArray;
      a.value_node = free_value(depth + 1);
      kids.push_back(add(std::move(a), "$"));
    }
    Node s;
    s.kind = NodeKind::kString;
    kids.push_back(add(std::move(s), "$"));
    Node num;
    num.kind = NodeKind::kNumber;
    kids.push_back(add(std::move(num), "$"));
    for (const char* lit : {"true", "false", "null"}) kids.push_back(literal(lit, "$"));
    g_.nodes[size_t(id)].children = kids;
    return id;
  }
  int32_t free_object(int depth, int32_t value = -1) {
    Node o;
    o.kind = NodeKind::kObject;
    o.free_keys = true;
    Node key;
    key.kind = NodeKind::kString;
    o.key_node = add(std::move(key), "$");
    o.value_node = value >= 0 ? value : free_value(depth + 1);
    return add(std::move(o), "$");
  }

  int32_t compile(const json& s, const std::string& path, int depth) {
    if (depth > limits_.max_schema_depth)
      refuse(path, "nested deeper than " + std::to_string(limits_.max_schema_depth) +
                       " schemas (the limit)");
    if (s.is_boolean()) {
      if (!s.get<bool>()) refuse(path, "the schema false accepts nothing");
      return free_value(0);
    }
    if (!s.is_object()) refuse(path, "expected a schema object, got " + std::string(s.type_name()));
    for (const auto& [key, _] : s.items())
      if (!supported_keywords().count(key) && !ignored_keywords().count(key))
        refuse(path + "." + key, "keyword '" + key + "' is not supported");
    if (s.contains("$ref")) {
      if (s.size() > 1)
        for (const auto& [key, _] : s.items())
          if (key != "$ref" && !ignored_keywords().count(key))
            refuse(path + "." + key, "keyword '" + key + "' beside $ref is not supported");
      return ref(s["$ref"], path + ".$ref", depth);
    }
    if (s.contains("const")) return literal(s["const"].dump(), path + ".const");
    if (s.contains("enum")) return enumeration(s["enum"], path + ".enum");
    for (const char* alt : {"anyOf", "oneOf"})
      if (s.contains(alt))
        for (const auto& [key, _] : s.items())
          if (key != alt && !ignored_keywords().count(key))
            refuse(path + "." + key, "keyword '" + key + "' beside " + alt + " is not supported");
    if (s.contains("anyOf")) return alternatives(s["anyOf"], path + ".anyOf", depth, false);
    if (s.contains("oneOf")) return alternatives(s["oneOf"], path + ".oneOf", depth, true);
    if (!s.contains("type")) return free_value(0);
    const json& t = s["type"];
    if (t.is_string()) return typed(s, t.get<std::string>(), path, depth);
    if (!t.is_array() || t.empty())
      refuse(path + ".type", "expected a type name or a non-empty list of them");
    Node c;
    c.kind = NodeKind::kChoice;
    for (const auto& name : t) {
      if (!name.is_string()) refuse(path + ".type", "expected type names");
      c.children.push_back(typed(s, name.get<std::string>(), path, depth));
    }
    return add(std::move(c), path);
  }

  int32_t typed(const json& s, const std::string& type, const std::string& path, int depth) {
    if (type == "object") return object(s, path, depth);
    if (type == "array") return array(s, path, depth);
    if (type == "string") return string(s, path);
    if (type == "number" || type == "integer") return number(s, path, type == "integer");
    if (type == "boolean") {
      Node c;
      c.kind = NodeKind::kChoice;
      c.children = {literal("true", path), literal("false", path)};
      return add(std::move(c), path);
    }
    if (type == "null") return literal("null", path);
    refuse(path + ".type", "unknown type '" + type + "'");
  }

  int32_t object(const json& s, const std::string& path, int depth) {
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    const json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) refuse(path + ".required", "expected a list of names");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) refuse(path + ".required", "expected property names");
        required.insert(r.get<std::string>());
      }
    }
    if (!props || props->empty()) {
      if (!required.empty())
        refuse(path + ".required", "names properties the schema does not declare");
      if (extra && extra->is_boolean() && !extra->get<bool>()) return literal("{}", path);
      if (!extra || extra->is_boolean()) return free_object(0);
      return free_object(0, compile(*extra, path + ".additionalProperties", depth + 1));
    }
    if (!props->is_object()) refuse(path + ".properties", "expected an object");
    if (extra && !extra->is_boolean() && !extra->is_object())
      refuse(path + ".additionalProperties", "expected a boolean or a schema");
    Node o;
    o.kind = NodeKind::kObject;
    for (const auto& [key, sub] : props->items()) {
      Property p;
      p.key_node = literal(json(key).dump(), path + ".properties");
      p.value_node = compile(sub, path + ".properties." + key, depth + 1);
      p.required = required.erase(key) > 0;
      o.properties.push_back(p);
    }
    if (!required.empty())
      refuse(path + ".required", "names '" + *required.begin() + "', which is not a property");
    return add(std::move(o), path);
  }

  int32_t array(const json& s, const std::string& path, int depth) {
    Node a;
    a.kind = NodeKind::kArray;
    a.min_items = count(s, "minItems", path, 0);
    a.max_items = count(s, "maxItems", path, -1);
    if (a.max_items >= 0 && a.max_items < a.min_items)
      refuse(path + ".maxItems", "is below minItems");
    a.value_node =
        s.contains("items") ? compile(s["items"], path + ".items", depth + 1) : free_value(0);
    return add(std::move(a), path);
  }

  int32_t string(const json& s, const std::string& path) {
    Node n;
    n.kind = NodeKind::kString;
    n.min_length = count(s, "minLength", path, 0);
    n.max_length = count(s, "maxLength", path, -1);
    if (n.max_length > limits_.max_string_length) n.max_length = -1;
    if (n.min_length > limits_.max_string_length)
      refuse(path + ".minLength", "above " + std::to_string(limits_.max_string_length));
    if (n.max_length >= 0 && n.max_length < n.min_length)
      refuse(path + ".maxLength", "is below minLength");
    return add(std::move(n), path);
  }

  int32_t number(const json& s, const std::string& path, bool integer) {
    Node n;
    n.kind = NodeKind::kNumber;
    n.integer = integer;
    // The stricter of minimum / exclusiveMinimum (and of the maxima); on a tie the exclusive one.
    auto bound = [&](const char* key, bool exclusive, bool lower, bool& has, double& v,
                     bool& excl) {
      if (!s.contains(key)) return;
      if (!s[key].is_number()) refuse(path + "." + key, "expected a number");
      const double x = s[key].get<double>();
      if (!std::isfinite(x)) refuse(path + "." + key, "expected a finite number");
      const bool stricter = !has || (lower ? x > v : x < v) || (x == v && exclusive);
      if (!stricter) return;
      has = true;
      v = x;
      excl = exclusive;
    };
    bound("minimum", false, true, n.has_min, n.min, n.exclusive_min);
    bound("exclusiveMinimum", true, true, n.has_min, n.min, n.exclusive_min);
    bound("maximum", false, false, n.has_max, n.max, n.exclusive_max);
    bound("exclusiveMaximum", true, false, n.has_max, n.max, n.exclusive_max);
    if (integer) {
      // Exact bounds within what 18 digits hold; a bound outside cannot bind.
      constexpr double kBig = 9e17;
      const bool bounded = n.has_min || n.has_max;
      n.imin = -int64_t(kBig);
      n.imax = int64_t(kBig);
      if (n.has_min && n.min > -kBig) {
        const double c = n.exclusive_min ? std::floor(n.min) + 1 : std::ceil(n.min);
        n.imin = c > kBig ? int64_t(kBig) + 1 : int64_t(c);
      }
      if (n.has_max && n.max < kBig) {
        const double f = n.exclusive_max ? std::ceil(n.max) - 1 : std::floor(n.max);
        n.imax = f < -kBig ? -int64_t(kBig) - 1 : int64_t(f);
      }
      n.has_min = n.has_max = bounded;  // tracked by the automaton only when the schema bounds it
      if (n.imin > n.imax) refuse(path, "no integer lies between the bounds");
    } else if (n.has_min && n.has_max &&
               (n.min > n.max || (n.min == n.max && (n.exclusive_min || n.exclusive_max)))) {
      refuse(path, "no number lies between the bounds");
    } else if ((n.has_min || n.has_max) && !snap_number_bounds(n)) {
      refuse(path, "no number with at most " + std::to_string(kNumberDigits) + " integer and " +
                       std::to_string(kFracDigits) +
                       " fraction digits (and no exponent) lies between the bounds");
    }
    return add(std::move(n), path);
  }

  int32_t enumeration(const json& values, const std::string& path) {
    if (!values.is_array() || values.empty()) refuse(path, "expected a non-empty list");
    Node c;
    c.kind = NodeKind::kChoice;
    std::set<std::string> seen;
    for (const auto& v : values)
      if (seen.insert(v.dump()).second) c.children.push_back(literal(v.dump(), path));
    return add(std::move(c), path);
  }

  int32_t alternatives(const json& list, const std::string& path, int depth, bool exclusive) {
    if (!list.is_array() || list.empty()) refuse(path, "expected a non-empty list of schemas");
    Node c;
    c.kind = NodeKind::kChoice;
    for (size_t i = 0; i < list.size(); ++i)
      c.children.push_back(compile(list[i], path + "[" + std::to_string(i) + "]", depth + 1));
    if (exclusive) check_one_of_disjoint(g_, c.children, path);
    return add(std::move(c), path);
  }

  int32_t ref(const json& r, const std::string& path, int depth) {
    if (!r.is_string()) refuse(path, "expected a string");
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    std::string name;
    const json* defs = nullptr;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (target.rfind(p, 0) == 0) {
        name = target.substr(p.size());
        const std::string key = p.substr(2, p.size() - 3);
        if (root_schema_.is_object() && root_schema_.contains(key)) defs = &root_schema_[key];
      }
    }
    if (target == "#") refuse(path, "a $ref to the root schema is not supported");
    if (!defs || !defs->is_object() || !defs->contains(name))
      refuse(path, "'" + target + "' does not name an entry of the schema's $defs/definitions");
    if (int(refs_.size()) >= limits_.max_ref_expansions)
      refuse(path, "more than " + std::to_string(limits_.max_ref_expansions) + " $ref targets");
    // A placeholder choice of one child lets a recursive reference point at the node first.
    Node c;
    c.kind = NodeKind::kChoice;
    const int32_t id = add(c, path);
    refs_[target] = id;
    const int32_t body = compile((*defs)[name], target, depth + 1);
    g_.nodes[size_t(id)].children = {body};
    return id;
  }

  int32_t count(const json& s, const char* key, const std::string& path, int32_t absent) {
    if (!s.contains(key)) return absent;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 30))
      refuse(path + "." + key, "expected a non-negative integer");
    return int32_t(v.get<int64_t>());
  }

  const json& root_schema_;
  GrammarLimits limits_;
  Grammar& g_;
  int64_t literal_bytes_ = 0;
  std::map<int, int32_t> free_values_;
  std::map<std::string, int32_t> refs_;
};

}  // namespace

int32_t add_node(Grammar& g, Node n, const std::string& path) {
  if (int(g.nodes.size()) >= g.limits.max_nodes)
    refuse(path, "the schema needs more than " + std::to_string(g.limits.max_nodes) +
                     " grammar nodes (the limit)");
  g.nodes.push_back(std::move(n));
  return int32_t(g.nodes.size()) - 1;
}

int32_t compile_schema_node(Grammar& g, const nlohmann::json& root, const nlohmann::json& schema,
                            const std::string& path) {
  return SchemaCompiler(root, g).compile_at(schema, path);
}

void finish_grammar(Grammar& g, int32_t value, bool json_root) {
  Node r;
  r.kind = NodeKind::kRoot;
  r.value_node = value;
  r.json = json_root;
  g.root = add_node(g, std::move(r), "$");
  check_choice_cycles(g);
  check_finite_values(g);
}

Grammar compile_grammar(const OutputConstraint& constraint, const GrammarLimits& limits,
                        const TagBytes& tag_bytes) {
  Grammar g;
  g.limits = limits;
  static const json kNone;
  switch (constraint.kind) {
    case OutputConstraint::Kind::kJsonObject:
      finish_grammar(g, SchemaCompiler(kNone, g).compile_free_object(), true);
      return g;
    case OutputConstraint::Kind::kJsonSchema:
      finish_grammar(g, SchemaCompiler(constraint.schema, g).compile_root(), true);
      return g;
    case OutputConstraint::Kind::kChoice:
      finish_grammar(g, SchemaCompiler(kNone, g).compile_choices(constraint.choices), false);
      return g;
    case OutputConstraint::Kind::kToolCall:
      finish_grammar(g, compile_tool_calls(g, constraint.tools, tag_bytes), false);
      return g;
    case OutputConstraint::Kind::kNone:
      break;
  }
  throw Error(ErrorKind::kInvalidArgument, "compile_grammar: the constraint is not active");
}

}  // namespace sparkglm::grammar
