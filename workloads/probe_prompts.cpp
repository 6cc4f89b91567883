#include "workloads/probe_prompts.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/filler_text.h"

namespace sparkglm::workloads {

using nlohmann::json;

namespace {

constexpr uint64_t kTagProbe = 5;  // beside prompt_builder.cpp's stream tags

// Draws of one request's values, in order: draw k is the stream's k-th.
class Draws {
 public:
  explicit Draws(uint64_t seed) : seed_(mix_seed(seed, kTagProbe)) {}
  int64_t between(int64_t lo, int64_t hi) { return draw_between(seed_, next_++, lo, hi); }
  std::string letters(int n) { return letter_tag(seed_, next_++, n); }
  std::string word(int lo, int hi) {  // capitalised, as curriculum.py's names and cities
    std::string w = letters(int(between(lo, hi)));
    w[0] = char(w[0] - 'a' + 'A');
    return w;
  }

 private:
  uint64_t seed_;
  uint64_t next_ = 0;
};

void background(Prompt& p, uint64_t seed) {
  p.head += "Background notes, not needed for the task:\n";
  p.filler = [seed](int64_t n) { return prose_words(seed, n); };
}

json function_tool(const char* name, const char* description, json parameters) {
  return {{"type", "function"},
          {"function",
           {{"name", name}, {"description", description}, {"parameters", std::move(parameters)}}}};
}

// curriculum.py's TOOLS, in its order.
const json& offered_tools() {
  static const json tools = json::array(
      {function_tool("get_weather", "Current weather for a city",
                     {{"type", "object"},
                      {"properties",
                       {{"city", {{"type", "string"}}},
                        {"unit", {{"type", "string"}, {"enum", {"celsius", "fahrenheit"}}}}}},
                      {"required", {"city"}}}),
       function_tool("lookup_order", "Status of an order by its id",
                     {{"type", "object"},
                      {"properties", {{"order_id", {{"type", "string"}}}}},
                      {"required", {"order_id"}}}),
       function_tool("add_numbers", "Sum of two integers",
                     {{"type", "object"},
                      {"properties", {{"x", {{"type", "integer"}}}, {"y", {{"type", "integer"}}}}},
                      {"required", {"x", "y"}}})});
  return tools;
}

// curriculum.py's SCHEMA_FIELDS: a name and its JSON type ("array": of strings).
constexpr std::array<std::pair<const char*, const char*>, 8> kFields = {{{"name", "string"},
                                                                         {"city", "string"},
                                                                         {"age", "integer"},
                                                                         {"score", "number"},
                                                                         {"active", "boolean"},
                                                                         {"tags", "array"},
                                                                         {"id", "string"},
                                                                         {"count", "integer"}}};

// A number of hundredths as Python prints k / 100 rounded to 2 places: 5.0, 81.8, 0.05.
std::string hundredths(int64_t k) {
  std::string s = std::to_string(k / 100) + ".";
  const int64_t f = k % 100;
  if (f % 10 == 0) return s + std::to_string(f / 10);
  return s + (f < 10 ? "0" : "") + std::to_string(f);
}

}  // namespace

void tool_call_prompt(Prompt& p, uint64_t seed) {
  Draws d(seed);
  json call;
  std::string ask;
  switch (d.between(0, 2)) {
    case 0: {
      const std::string city = d.word(4, 8);
      const std::string unit = d.between(0, 1) ? "fahrenheit" : "celsius";
      ask = "What is the weather in " + city + " in " + unit + "?";
      call = {{"name", "get_weather"}, {"arguments", {{"city", city}, {"unit", unit}}}};
      break;
    }
    case 1: {
      std::string id = d.letters(3);
      std::transform(id.begin(), id.end(), id.begin(), [](char c) { return char(c - 'a' + 'A'); });
      id += "-" + std::to_string(d.between(1000, 9999));
      ask = "Where is my order " + id + "?";
      call = {{"name", "lookup_order"}, {"arguments", {{"order_id", id}}}};
      break;
    }
    default: {
      const int64_t x = d.between(0, 9999), y = d.between(0, 9999);
      ask = "Use the tool to add " + std::to_string(x) + " and " + std::to_string(y) + ".";
      call = {{"name", "add_numbers"}, {"arguments", {{"x", x}, {"y", y}}}};
    }
  }
  background(p, seed);
  p.tail = "\n\n" + ask;
  p.body_extra["tools"] = offered_tools();
  p.expected = call.dump();
}

void json_schema_prompt(Prompt& p, uint64_t seed, bool constrained) {
  Draws d(seed);
  // 2-5 distinct fields, in kFields' order.
  std::vector<size_t> order(kFields.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t n = size_t(d.between(2, 5));
  for (size_t i = 0; i < n; ++i)
    std::swap(order[i], order[i + size_t(d.between(0, int64_t(order.size() - i - 1)))]);
  order.resize(n);
  std::sort(order.begin(), order.end());

  json schema = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
  // The schema as Python's json.dumps writes curriculum.py's (insertion order, ", " and ": ").
  std::string schema_text = "{\"type\": \"object\", \"properties\": {", required, values;
  for (size_t k = 0; k < n; ++k) {
    const auto [name, type] = kFields[order[k]];
    const std::string sep = k ? ", " : "";
    const std::string key = std::string("\"") + name + "\"";
    json property = {{"type", type}};
    std::string value;
    if (std::string(type) == "array") {
      property["items"] = {{"type", "string"}};
      schema_text += sep + key + ": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}";
      const int64_t items = d.between(1, 3);
      for (int64_t i = 0; i < items; ++i)
        value += (i ? ", " : "") + d.letters(int(d.between(2, 5)));
    } else {
      schema_text += sep + key + ": {\"type\": \"" + type + "\"}";
      const std::string t = type;
      value = t == "string"    ? "\"" + d.word(3, 8) + "\""
              : t == "integer" ? std::to_string(d.between(0, 999))
              : t == "number"  ? hundredths(d.between(0, 9999))
                               : (d.between(0, 1) ? "true" : "false");
    }
    schema["properties"][name] = property;
    schema["required"].push_back(name);
    required += sep + key;
    values += (k ? "; " : "") + std::string(name) + " = " + value;
  }
  schema_text += "}, \"required\": [" + required + "]}";
  background(p, seed);
  p.tail =
      "\n\nTask: output one JSON object that follows this schema, and nothing else.\nSchema: " +
      schema_text + "\nValues: " + values + "\n";
  if (constrained)
    p.body_extra["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "probe"}, {"schema", schema}, {"strict", true}}}};
  p.expected = schema.dump();
}

}  // namespace sparkglm::workloads
