#include "workloads/grader.h"

#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <set>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "engine/text/utf8_stream.h"
#include "workloads/prompt_builder.h"

namespace sparkglm::workloads {

using harness::RequestRecord;
using nlohmann::json;

namespace {

std::string where(const RequestRecord& r) {
  return "repetition " + std::to_string(r.repetition) + " request " + std::to_string(r.index);
}

// Collects failures: how many, the requests they were found in, and the first few spelled out.
class Failures {
 public:
  void add(const std::string& what) {
    if (count_++ < 3) detail_ += (detail_.empty() ? "" : "; ") + what;
  }
  // A failure of one request: "<where> <what>".
  void add(const RequestRecord& r, const std::string& what) {
    requests_.insert({r.repetition, r.index});
    add(where(r) + what);
  }
  int count() const { return count_; }
  int32_t failed_requests() const { return int32_t(requests_.size()); }
  std::string detail(const std::string& ok) const {
    if (count_ == 0) return ok;
    return detail_ + (count_ > 3 ? "; and " + std::to_string(count_ - 3) + " more" : "");
  }

 private:
  int count_ = 0;
  std::string detail_;
  std::set<std::pair<int32_t, int32_t>> requests_;  // (repetition, index)
};

std::vector<const RequestRecord*> measured(const std::vector<RequestRecord>& records,
                                           const std::string& case_id) {
  std::vector<const RequestRecord*> out;
  for (const RequestRecord& r : records)
    if (r.case_id == case_id && r.repetition >= 0) out.push_back(&r);
  return out;
}

size_t planned(const CasePlan& plan) {
  size_t n = 0;
  for (const RepetitionPlan& r : plan.repetitions)
    if (!r.warmup()) n += r.requests.size();
  return n;
}

const std::string* expected_of(const CasePlan& plan, const RequestRecord& r) {
  for (const RepetitionPlan& rep : plan.repetitions)
    if (rep.repetition == r.repetition && r.index >= 0 && size_t(r.index) < rep.expected.size())
      return &rep.expected[size_t(r.index)];
  return nullptr;
}

// Every "[[sg:...]]" in the text.
std::vector<std::string> markers_in(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = text.find("[[sg:"); at != std::string::npos; at = text.find("[[sg:", at + 1)) {
    const size_t end = text.find("]]", at);
    if (end == std::string::npos) break;
    const std::string m = text.substr(at, end + 2 - at);
    if (is_marker_text(m)) out.push_back(m);
  }
  return out;
}

// "ids <12 hex>" and, when logprobs came back, " logprobs <12 hex>".
std::string short_output_hash(const std::string& key) {
  const size_t slash = key.find('/');
  std::string out = "ids " + key.substr(0, std::min<size_t>(12, slash));
  if (slash != std::string::npos && slash + 1 < key.size())
    out += " logprobs " + key.substr(slash + 1, 12);
  return out;
}

// Groups the outputs by request index; a group passes when it holds one output with token ids.
// An output is its token-id hash and, when logprobs were returned, their hash too: so determinism
// and repetition compare the logprob bits of every step, not only the picks.
int differing_groups(const std::vector<const RequestRecord*>& records, Failures& failures,
                     const std::string& what) {
  std::map<int32_t, std::map<std::string, std::string>> by_index;  // index -> hash -> first seen
  for (const RequestRecord* r : records)
    by_index[r->index].emplace(
        r->token_ids_sha256.empty() ? "" : r->token_ids_sha256 + "/" + r->logprobs_sha256,
        r->case_id + " " + where(*r));
  int differing = 0;
  for (const auto& [index, hashes] : by_index) {
    if (hashes.size() == 1 && !hashes.begin()->first.empty()) continue;
    ++differing;
    std::string seen;
    for (const auto& [hash, first] : hashes)
      seen += (seen.empty() ? "" : ", ") +
              (hash.empty() ? std::string("(no ids)") : short_output_hash(hash)) + " at " + first;
    failures.add("request " + std::to_string(index) + " " + what + ": " + seen);
  }
  return differing;
}

GradeResult finish(GradeResult g, const Failures& failures, const std::string& ok) {
  g.observed = failures.count();
  g.expected = 0;
  g.pass = failures.count() == 0;
  g.detail = valid_utf8(failures.detail(ok));  // quotes model text, maybe cut mid-character
  g.failed_requests = std::min(g.requests, g.failed_requests + failures.failed_requests());
  return g;
}

// The JSON type name of a value, as a schema's "type" spells it.
std::string schema_type(const json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

bool has_type(const json& v, const std::string& type) {
  return schema_type(v) == type || (type == "number" && v.is_number());
}

// Why `v` does not satisfy `schema`, "" when it does. The subset probe_prompts.h writes: type,
// properties, required, items, additionalProperties false; other keywords are not checked.
std::string schema_mismatch(const json& v, const json& schema, const std::string& at) {
  const std::string type = schema.value("type", std::string());
  if (!type.empty() && !has_type(v, type))
    return at + " is " + schema_type(v) + ", expected " + type;
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& key : schema.value("required", json::array()))
      if (key.is_string() && !v.contains(key.get<std::string>()))
        return at + " lacks the required key " + key.dump();
    for (const auto& [key, value] : v.items()) {
      if (props.contains(key)) {
        if (std::string why = schema_mismatch(value, props[key], at + "." + key); !why.empty())
          return why;
      } else if (const auto extra = schema.find("additionalProperties");
                 extra != schema.end() && extra->is_boolean() && !extra->get<bool>()) {
        return at + " has the key \"" + key + "\", which the schema does not allow";
      }
    }
  }
  if (v.is_array() && schema.contains("items"))
    for (size_t i = 0; i < v.size(); ++i)
      if (std::string why =
              schema_mismatch(v[i], schema["items"], at + "[" + std::to_string(i) + "]");
          !why.empty())
        return why;
  return "";
}

}  // namespace

json to_json(const GradeResult& g) {
  return {{"name", g.name},
          {"case", g.case_id},
          {"pass", g.pass},
          {"observed", g.observed},
          {"expected", g.expected},
          {"detail", g.detail},
          {"informational", g.informational}};
}

const std::vector<std::string>& grader_names() {
  static const std::vector<std::string> names = {
      "exact_length", "structured_50",        "arithmetic", "needle",     "isolation",
      "determinism",  "repetition_identical", "tool_call",  "json_schema"};
  return names;
}

bool is_grader(const std::string& name) {
  const auto& n = grader_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

bool needs_real_model(const GraderSpec& g) {
  if (g.name == "isolation") return g.params.value("require_own", false);
  return g.name == "structured_50" || g.name == "arithmetic" || g.name == "needle" ||
         g.name == "tool_call" || g.name == "json_schema";
}

std::string last_answer(const std::string& text) {
  // "−" (U+2212) is how some models write a minus.
  std::string t = std::regex_replace(text, std::regex("\xE2\x88\x92"), "-");
  static const std::regex answer(R"(Answer\s*:\s*\**\s*(-?\s*[0-9][0-9,]*))");
  std::string last;
  for (auto it = std::sregex_iterator(t.begin(), t.end(), answer); it != std::sregex_iterator();
       ++it)
    last = (*it)[1].str();
  std::string digits;
  for (char c : last)
    if (c == '-' || (c >= '0' && c <= '9')) digits += c;
  return digits;
}

std::string check_structured_50(const std::string& text) {
  // Every balanced {...} that parses as a JSON object, in order; strings are skipped when
  // matching braces so that a "}" inside a string does not end an object.
  std::vector<json> objects;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '{') continue;
    int depth = 0;
    bool in_string = false;
    size_t end = std::string::npos;
    for (size_t k = i; k < text.size(); ++k) {
      const char c = text[k];
      if (in_string) {
        if (c == '\\')
          ++k;
        else if (c == '"')
          in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        end = k;
        break;
      }
    }
    if (end == std::string::npos) break;
    json j;
    try {
      j = parse_json(text.substr(i, end + 1 - i), "an object in the answer",
                     ErrorKind::kInvalidArgument, json_limits::kServerReply);
    } catch (const Error&) {
      continue;  // not JSON, or nested too deep to judge: a later '{' may start an object
    }
    if (j.is_object()) {
      objects.push_back(std::move(j));
      i = end;
    }
  }
  if (objects.size() != 50)
    return "found " + std::to_string(objects.size()) + " JSON objects, expected exactly 50";
  for (size_t k = 0; k < objects.size(); ++k) {
    const json& o = objects[k];
    const int64_t index = int64_t(k) + 1;
    const std::string at = "object " + std::to_string(k) + " " + o.dump();
    if (o.size() != 2 || !o.contains("index") || !o.contains("square"))
      return at + ": expected exactly the keys index and square";
    if (!o["index"].is_number_integer() || o["index"].get<int64_t>() != index)
      return at + ": expected index " + std::to_string(index);
    if (!o["square"].is_number_integer() || o["square"].get<int64_t>() != index * index)
      return at + ": expected square " + std::to_string(index * index);
  }
  return "";
}

std::string check_tool_call(const std::vector<harness::ToolCallRecord>& calls,
                            const std::string& expected) {
  const json want = json::parse(expected);
  const std::string name = want.at("name").get<std::string>();
  if (calls.size() != 1)
    return std::to_string(calls.size()) + " tool calls, expected one call of " + name;
  const harness::ToolCallRecord& call = calls[0];
  if (call.name != name) return "called " + call.name + ", expected " + name;
  json args;
  try {
    args = parse_json(call.arguments, "the call's arguments", ErrorKind::kInvalidArgument,
                      json_limits::kServerReply);
  } catch (const Error& e) {
    return "arguments are not JSON: " + e.message().substr(0, 200);
  }
  if (!args.is_object()) return "arguments are " + schema_type(args) + ", expected an object";
  const json& want_args = want.at("arguments");
  for (const auto& [key, value] : want_args.items())
    if (!args.contains(key))
      return "arguments lack " + key;
    else if (schema_type(args[key]) != schema_type(value))
      return "argument " + key + " is " + schema_type(args[key]) + ", expected " +
             schema_type(value);
  for (const auto& [key, value] : args.items())
    if (!want_args.contains(key)) return "argument " + key + " is not one of " + name + "'s";
  return "";
}

std::string check_json_schema(const std::string& text, const std::string& schema) {
  size_t b = text.find_first_not_of(" \t\r\n"), e = text.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) return "the reply is empty, expected a JSON object";
  json v;
  try {
    v = parse_json(text.substr(b, e + 1 - b), "the reply", ErrorKind::kInvalidArgument,
                   json_limits::kServerReply);
  } catch (const Error& err) {
    return "the reply is not one JSON value: " + err.message().substr(0, 200);
  }
  return schema_mismatch(v, json::parse(schema), "the reply");
}

namespace {

// The graders that compare each reply with its request's expected value in the plan: what that
// value is called, why a reply fails it ("" when it passes), and the detail when every one passes.
struct ExpectedCheck {
  const char* expected;
  std::function<std::string(const RequestRecord&, const std::string&)> why;
  const char* ok;
};

const ExpectedCheck* expected_check(const std::string& grader) {
  static const std::map<std::string, ExpectedCheck> checks = {
      {"arithmetic",
       {"expected value",
        [](const RequestRecord& r, const std::string& want) {
          const std::string got = last_answer(r.output_text);
          return got == want
                     ? std::string()
                     : "last answer " + (got.empty() ? "(none)" : got) + ", expected " + want;
        },
        "every last Answer: is right"}},
      {"needle",
       {"expected value",
        [](const RequestRecord& r, const std::string& want) {
          return r.output_text.find(want) == std::string::npos ? "output lacks the value " + want
                                                               : std::string();
        },
        "every output contains its needle's value"}},
      {"tool_call",
       {"expected call",
        [](const RequestRecord& r, const std::string& want) {
          return check_tool_call(r.tool_calls, want);
        },
        "every reply is one call of the asked tool with its arguments"}},
      {"json_schema",
       {"schema",
        [](const RequestRecord& r, const std::string& want) {
          return check_json_schema(r.output_text, want);
        },
        "every reply is one JSON object that follows its schema"}}};
  const auto it = checks.find(grader);
  return it == checks.end() ? nullptr : &it->second;
}

}  // namespace

GradeResult grade(const GraderSpec& grader, const CaseSpec& spec, const CasePlan& plan,
                  const std::vector<RequestRecord>& records) {
  GradeResult g;
  g.name = grader.name;
  g.case_id = spec.id;
  Failures failures;
  const std::vector<const RequestRecord*> mine = measured(records, spec.id);
  g.requests = int32_t(planned(plan));
  if (mine.size() != planned(plan)) {
    failures.add("expected " + std::to_string(planned(plan)) + " measured records, got " +
                 std::to_string(mine.size()));
    g.failed_requests = std::max(0, g.requests - int32_t(mine.size()));  // the missing ones
  }
  for (const RequestRecord* r : mine)
    if (!r->ok) failures.add(*r, " failed: " + r->error);

  if (grader.name == "exact_length") {
    for (const RequestRecord* r : mine) {
      if (!r->ok) continue;
      if (spec.ignore_eos && r->completion_tokens != spec.max_tokens)
        failures.add(*r, ": " + std::to_string(r->completion_tokens) +
                             " completion tokens, expected " + std::to_string(spec.max_tokens));
      if (spec.return_token_ids && int32_t(r->token_ids.size()) != r->completion_tokens)
        failures.add(*r, ": " + std::to_string(r->token_ids.size()) + " token ids returned for " +
                             std::to_string(r->completion_tokens) + " completion tokens");
    }
    return finish(
        g, failures,
        "every output is exactly " + std::to_string(spec.max_tokens) + " tokens with its ids");
  }
  if (grader.name == "structured_50") {
    for (const RequestRecord* r : mine)
      if (const std::string why = check_structured_50(r->output_text); r->ok && !why.empty())
        failures.add(*r, ": " + why);
    return finish(g, failures, "every output holds the 50 {index, square} objects");
  }
  if (const ExpectedCheck* c = expected_check(grader.name)) {
    for (const RequestRecord* r : mine) {
      const std::string* want = expected_of(plan, *r);
      if (!r->ok) continue;
      if (!want || want->empty())
        failures.add(*r, std::string(": the plan has no ") + c->expected);
      else if (const std::string why = c->why(*r, *want); !why.empty())
        failures.add(*r, ": " + why);
    }
    return finish(g, failures, c->ok);
  }
  if (grader.name == "isolation") {
    const bool require_own = grader.params.value("require_own", false);
    for (const RequestRecord* r : mine) {
      if (!r->ok) continue;
      const std::string text = r->reasoning_text + "\n" + r->output_text;
      std::set<std::string> foreign;
      for (const std::string& m : markers_in(text))
        if (m != r->marker) foreign.insert(m);
      for (const std::string& m : foreign) failures.add(*r, ": foreign marker " + m);
      if (require_own && (r->marker.empty() || r->output_text.find(r->marker) == std::string::npos))
        failures.add(*r, ": own marker " + r->marker + " not echoed");
    }
    return finish(
        g, failures,
        require_own ? "own marker echoed, no foreign marker" : "no foreign marker in any output");
  }
  if (grader.name == "determinism") {
    const std::string ref = grader.params.value("reference_case", std::string());
    std::vector<const RequestRecord*> both = measured(records, ref);
    if (both.empty()) failures.add("no measured records of the reference case " + ref);
    both.insert(both.end(), mine.begin(), mine.end());
    differing_groups(both, failures, "differs from " + ref);
    return finish(g, failures, "every output equals its " + ref + " output");
  }
  if (grader.name == "repetition_identical") {
    differing_groups(mine, failures, "differs across repetitions");
    return finish(g, failures, "every request repeats its token ids across repetitions");
  }
  throw Error(ErrorKind::kInvalidConfig, "grader \"" + grader.name + "\" is unknown");
}

std::vector<GradeResult> grade_workload(const WorkloadSpec& spec, const WorkloadPlan& plan,
                                        const std::vector<RequestRecord>& records) {
  std::vector<GradeResult> out;
  for (const CaseSpec& c : spec.cases) {
    const CasePlan* p = plan.find_case(c.id);
    if (!p) throw Error(ErrorKind::kInvalidArgument, "grade_workload: no plan for case " + c.id);
    for (const GraderSpec& g : c.graders) out.push_back(grade(g, c, *p, records));
  }
  return out;
}

}  // namespace sparkglm::workloads
