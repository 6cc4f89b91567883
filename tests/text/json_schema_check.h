#pragma once
// The tests' own validator of a JSON value against the schema subset schema_compiler.h supports:
// an independent check of what the grammar generated. Returns "" when valid, else where and why.
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace sparkglm::testing {

inline std::string check_schema(const nlohmann::json& v, const nlohmann::json& s,
                                const nlohmann::json& root, const std::string& path = "$") {
  using json = nlohmann::json;
  auto fail = [&](const std::string& why) { return path + ": " + why + " (" + v.dump() + ")"; };
  if (s.is_boolean() || s.empty()) return "";
  if (s.contains("$ref")) {
    std::string r = s["$ref"];
    const std::string key = r.rfind("#/$defs/", 0) == 0 ? "$defs" : "definitions";
    return check_schema(v, root[key][r.substr(r.find('/', 2) + 1)], root, path);
  }
  if (s.contains("const") && v != s["const"]) return fail("not the const");
  if (s.contains("enum")) {
    for (const auto& e : s["enum"])
      if (e == v) return "";
    return fail("not in the enum");
  }
  for (const char* alt : {"anyOf", "oneOf"})
    if (s.contains(alt)) {
      int ok = 0;
      for (const auto& b : s[alt]) ok += check_schema(v, b, root, path).empty();
      if (ok == 0 || (std::string(alt) == "oneOf" && ok > 1)) return fail(std::string(alt));
      return "";
    }
  if (s.contains("type")) {
    json types = s["type"].is_array() ? s["type"] : json::array({s["type"]});
    bool any = false;
    for (const auto& t : types) {
      const std::string n = t;
      any = any || (n == "object" && v.is_object()) || (n == "array" && v.is_array()) ||
            (n == "string" && v.is_string()) || (n == "number" && v.is_number()) ||
            (n == "integer" && (v.is_number_integer() ||
                                (v.is_number_float() && std::floor(v.get<double>()) == v))) ||
            (n == "boolean" && v.is_boolean()) || (n == "null" && v.is_null());
    }
    if (!any) return fail("wrong type");
  }
  if (v.is_object()) {
    for (const auto& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return fail("missing " + r.dump());
    const json props = s.value("properties", json::object());
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (auto e = check_schema(x, props[k], root, path + "." + k); !e.empty()) return e;
      } else if (s.contains("additionalProperties")) {
        const json& ap = s["additionalProperties"];
        if (ap.is_boolean() && !ap.get<bool>()) return fail("extra key " + k);
        if (auto e = check_schema(x, ap, root, path + "." + k); !e.empty()) return e;
      }
    }
  }
  if (v.is_array()) {
    if (v.size() < s.value("minItems", size_t(0))) return fail("too few items");
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>())
      return fail("too many items");
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        if (auto e = check_schema(v[i], s["items"], root, path + "[" + std::to_string(i) + "]");
            !e.empty())
          return e;
  }
  if (v.is_string()) {
    // Code points: bytes that do not continue a UTF-8 sequence.
    size_t n = 0;
    for (unsigned char c : v.get<std::string>()) n += (c & 0xC0) != 0x80;
    if (n < s.value("minLength", size_t(0))) return fail("too short");
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return fail("too long");
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return fail("below minimum");
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return fail("above maximum");
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>())
      return fail("not above exclusiveMinimum");
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>())
      return fail("not below exclusiveMaximum");
  }
  return "";
}

}  // namespace sparkglm::testing
