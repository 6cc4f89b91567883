#include "workloads/workload_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "workloads/grader.h"
#include "workloads/prompt_builder.h"

namespace sparkglm::workloads {

using nlohmann::json;

namespace {

// Reads one JSON object's fields, naming each problem "<source>: <path>.<key>: ...".
class Fields {
 public:
  Fields(const json& j, std::string source, std::string path, std::set<std::string> allowed)
      : j_(j), source_(std::move(source)), path_(std::move(path)) {
    if (!j_.is_object()) fail(path_.empty() ? "(top level)" : path_, "a JSON object");
    for (const auto& [key, value] : j_.items())
      if (!allowed.count(key)) fail(name(key), "absent: not a field of this object (a typo?)");
  }

  [[noreturn]] void fail(const std::string& field, const std::string& expected) const {
    throw Error(ErrorKind::kInvalidConfig, source_ + ": " + field + ": expected " + expected);
  }
  std::string name(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  // A literal key: a temporary std::string would make g++ 13 warn (-Wdangling-reference).
  const json& at(const char* key) const { return j_[key]; }

  std::string text(const std::string& key, const std::string* fallback = nullptr) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(name(key), "a string (required)");
    }
    if (!j_[key].is_string()) fail(name(key), "a string");
    return j_[key].get<std::string>();
  }
  int64_t integer(const std::string& key, int64_t lo, int64_t hi,
                  std::optional<int64_t> fallback) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(name(key),
           "an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + " (required)");
    }
    return integer_value(j_[key], name(key), lo, hi);
  }
  int64_t integer_value(const json& v, const std::string& field, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail(field, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + " (got " +
                      v.dump() + ")");
    return v.get<int64_t>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail(name(key), "true or false");
    return j_[key].get<bool>();
  }
  double number(const std::string& key, double lo, double hi, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo ||
        v.get<double>() > hi)
      fail(name(key), "a number from " + json(lo).dump() + " to " + json(hi).dump());
    return v.get<double>();
  }

 private:
  const json& j_;
  std::string source_, path_;
};

const std::regex kWorkloadId("^[a-z0-9][a-z0-9._-]*$");
const std::regex kCaseId("^[a-z0-9][a-z0-9_-]*$");
const std::regex kSalt("^[a-z0-9][a-z0-9-]*$");
constexpr int32_t kMaxTokens = 1 << 21;

// Numbers a case may put in the request body. logprobs (completions: how many alternatives per
// token) makes the server return logprob bits, which the determinism grader compares.
const std::set<std::string> kSamplingKeys = {"temperature",
                                             "top_p",
                                             "top_k",
                                             "min_p",
                                             "seed",
                                             "presence_penalty",
                                             "frequency_penalty",
                                             "repetition_penalty",
                                             "logprobs"};

PromptSpec parse_prompt(const json& j, const std::string& source, const std::string& path,
                        int32_t requests) {
  const Fields f(j, source, path,
                 {"builder", "seed", "tokens", "min_tokens", "system_tokens", "sessions",
                  "echo_marker", "constrained", "depth"});
  PromptSpec p;
  p.builder = f.text("builder");
  if (!is_builder(p.builder)) {
    std::string names;
    for (const auto& n : builder_names()) names += (names.empty() ? "" : ", ") + n;
    f.fail(f.name("builder"), "one of " + names + " (got \"" + p.builder + "\")");
  }
  if (p.builder == "filler") p.builder = "prose";
  // A JSON parser reads 7 as unsigned, code writes it as signed: both are fine when >= 0.
  if (!f.has("seed") || !f.at("seed").is_number_integer() ||
      (!f.at("seed").is_number_unsigned() && f.at("seed").get<int64_t>() < 0))
    f.fail(f.name("seed"), "an unsigned integer (required)");
  p.seed = f.at("seed").get<uint64_t>();
  p.min_tokens = int32_t(f.integer("min_tokens", 1, kMaxTokens, 16));
  if (!f.has("tokens")) f.fail(f.name("tokens"), "an integer or an array of integers (required)");
  const json& tokens = f.at("tokens");
  if (tokens.is_array()) {
    if (int32_t(tokens.size()) != requests)
      f.fail(f.name("tokens"), "one entry per request (" + std::to_string(requests) + "), got " +
                                   std::to_string(tokens.size()));
    for (size_t i = 0; i < tokens.size(); ++i)
      p.tokens.push_back(int32_t(f.integer_value(
          tokens[i], f.name("tokens") + "[" + std::to_string(i) + "]", p.min_tokens, kMaxTokens)));
  } else {
    p.tokens.push_back(
        int32_t(f.integer_value(tokens, f.name("tokens"), p.min_tokens, kMaxTokens)));
  }
  p.system_tokens = int32_t(f.integer("system_tokens", 0, kMaxTokens, 0));
  p.echo_marker = f.boolean("echo_marker", false);
  p.constrained = f.boolean("constrained", false);
  if (p.constrained && p.builder != "json_schema")
    f.fail(f.name("constrained"), "absent: only the json_schema builder constrains its output");
  if (f.has("depth")) {
    if (p.builder != "needle")
      f.fail(f.name("depth"), "absent: only the needle builder places a needle");
    const json& d = f.at("depth");
    if (!d.is_number() || !(d.get<double>() >= 0) || !(d.get<double>() <= 1))
      f.fail(f.name("depth"), "a number in [0, 1]: where the needle sits in each table");
    p.depth = d.get<double>();
  }
  if (f.has("sessions")) {
    const json& s = f.at("sessions");
    if (!s.is_array() || int32_t(s.size()) != requests)
      f.fail(f.name("sessions"),
             "an array with one session number per request (" + std::to_string(requests) + ")");
    for (size_t i = 0; i < s.size(); ++i)
      p.sessions.push_back(int32_t(
          f.integer_value(s[i], f.name("sessions") + "[" + std::to_string(i) + "]", 0, 1000)));
  }
  const bool conversation = p.builder == "conversation";
  if (!conversation && f.has("sessions"))
    f.fail(f.name("sessions"), "absent: only the conversation builder has sessions");
  if (!conversation && p.system_tokens > 0)
    f.fail(f.name("system_tokens"), "absent: only the conversation builder has a system prompt");
  if (conversation) {
    // A later turn of a session resends the earlier ones, so it must be longer.
    std::map<int32_t, int32_t> last;
    for (int32_t i = 0; i < requests; ++i) {
      const int32_t s = p.sessions.empty() ? 0 : p.sessions[i];
      const int32_t t = p.tokens_for(i);
      if (t <= p.system_tokens)
        f.fail(f.name("tokens") + "[" + std::to_string(i) + "]",
               "more than system_tokens (" + std::to_string(p.system_tokens) + ")");
      if (last.count(s) && t <= last[s])
        f.fail(f.name("tokens") + "[" + std::to_string(i) + "]",
               "more than the previous turn of session " + std::to_string(s) + " (" +
                   std::to_string(last[s]) + "): a turn resends its history");
      last[s] = t;
    }
  }
  return p;
}

GraderSpec parse_grader(const json& j, const std::string& source, const std::string& path) {
  GraderSpec g;
  if (j.is_string()) {
    g.name = j.get<std::string>();
  } else if (j.is_object() && j.contains("name") && j["name"].is_string()) {
    g.name = j["name"].get<std::string>();
    for (const auto& [key, value] : j.items())
      if (key != "name") g.params[key] = value;
  } else {
    throw Error(ErrorKind::kInvalidConfig,
                source + ": " + path + ": expected a grader name or {\"name\": ..., ...}");
  }
  if (!is_grader(g.name)) {
    std::string names;
    for (const auto& n : grader_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::kInvalidConfig,
                source + ": " + path + ": expected one of " + names + " (got \"" + g.name + "\")");
  }
  std::set<std::string> allowed;
  if (g.name == "isolation") allowed = {"require_own"};
  if (g.name == "determinism") allowed = {"reference_case"};
  allowed.insert("name");
  const json object = j.is_object() ? j : json::object();
  const Fields f(object, source, path, allowed);
  if (g.name == "isolation") (void)f.boolean("require_own", false);
  if (g.name == "determinism") (void)f.text("reference_case");
  return g;
}

CaseSpec parse_case(const json& j, const std::string& source, const std::string& path, bool gate) {
  const Fields f(j, source, path, {"id",          "title",
                                   "description", "endpoint",
                                   "prompt",      "max_tokens",
                                   "ignore_eos",  "return_token_ids",
                                   "sampling",    "chat_template_kwargs",
                                   "arrival",     "requests",
                                   "repetitions", "min_repetitions",
                                   "warmups",     "salt",
                                   "warm_replay", "fresh_each_repetition",
                                   "timeout_s",   "graders",
                                   "cold_prefill"});
  CaseSpec c;
  c.id = f.text("id");
  if (!std::regex_match(c.id, kCaseId))
    f.fail(f.name("id"), "^[a-z0-9][a-z0-9_-]*$ (got \"" + c.id + "\")");
  c.title = f.text("title");
  const std::string endpoint = f.text("endpoint");
  if (endpoint == "chat") {
    c.endpoint = Endpoint::kChat;
  } else if (endpoint == "completions") {
    c.endpoint = Endpoint::kCompletions;
  } else {
    f.fail(f.name("endpoint"), "\"chat\" or \"completions\" (got \"" + endpoint + "\")");
  }
  c.requests = int32_t(f.integer("requests", 1, 100000, 1));
  if (!f.has("prompt")) f.fail(f.name("prompt"), "an object (required)");
  c.prompt = parse_prompt(f.at("prompt"), source, f.name("prompt"), c.requests);
  if ((c.prompt.builder == "conversation" || c.prompt.builder == "tool_call") &&
      c.endpoint != Endpoint::kChat)
    f.fail(f.name("endpoint"), "\"chat\": the " + c.prompt.builder + " builder sends messages" +
                                   (c.prompt.builder == "tool_call" ? " and tools" : ""));
  c.max_tokens = int32_t(f.integer("max_tokens", 1, kMaxTokens, std::nullopt));
  c.ignore_eos = f.boolean("ignore_eos", true);
  c.return_token_ids = f.boolean("return_token_ids", true);
  if (f.has("sampling")) {
    const Fields s(f.at("sampling"), source, f.name("sampling"), kSamplingKeys);
    for (const auto& [key, value] : f.at("sampling").items())
      if (!value.is_number()) s.fail(s.name(key), "a number");
    c.sampling = f.at("sampling");
  }
  if (f.has("chat_template_kwargs")) {
    if (c.endpoint != Endpoint::kChat)
      f.fail(f.name("chat_template_kwargs"), "absent: only chat requests render a template");
    if (!f.at("chat_template_kwargs").is_object())
      f.fail(f.name("chat_template_kwargs"), "an object");
    c.chat_template_kwargs = f.at("chat_template_kwargs");
  }
  if (!f.has("arrival")) f.fail(f.name("arrival"), "an arrival schedule object (required)");
  try {
    c.arrival = harness::arrival_from_json(f.at("arrival"));
  } catch (const Error& e) {
    throw Error(ErrorKind::kInvalidConfig, source + ": " + f.name("arrival") + ": " + e.message());
  }
  c.repetitions = int32_t(f.integer("repetitions", 1, 10000, std::nullopt));
  if (gate && c.repetitions < 3) f.fail(f.name("repetitions"), "at least 3 in a gate workload");
  c.min_repetitions = int32_t(f.integer("min_repetitions", 1, 10000, gate ? 3 : 1));
  if (c.min_repetitions > c.repetitions)
    f.fail(f.name("min_repetitions"),
           "at most repetitions (" + std::to_string(c.repetitions) + ")");
  if (gate && c.min_repetitions < 3)
    f.fail(f.name("min_repetitions"), "at least 3 in a gate workload");
  c.warmups = int32_t(f.integer("warmups", 0, 100, 0));
  c.salt = f.text("salt");
  if (!std::regex_match(c.salt, kSalt))
    f.fail(f.name("salt"), "^[a-z0-9][a-z0-9-]*$ (got \"" + c.salt + "\")");
  c.warm_replay = f.boolean("warm_replay", false);
  if (c.warm_replay) {
    if (c.requests % 2 != 0)
      f.fail(f.name("requests"), "an even number with warm_replay (each prompt, then its replay)");
    for (int32_t i = 1; i < c.requests; i += 2)
      if (c.prompt.tokens_for(i) != c.prompt.tokens_for(i - 1))
        f.fail(f.name("prompt.tokens") + "[" + std::to_string(i) + "]",
               "the same as the request it replays (" + std::to_string(c.prompt.tokens_for(i - 1)) +
                   ")");
    if (c.prompt.builder == "conversation")
      f.fail(f.name("warm_replay"), "false with the conversation builder");
  }
  c.fresh_each_repetition = f.boolean("fresh_each_repetition", false);
  c.cold_prefill = f.boolean("cold_prefill", false);
  c.timeout_s = f.number("timeout_s", 1, 86400, 600);
  if (f.has("graders")) {
    if (!f.at("graders").is_array()) f.fail(f.name("graders"), "an array of graders");
    for (size_t i = 0; i < f.at("graders").size(); ++i)
      c.graders.push_back(parse_grader(f.at("graders")[i], source,
                                       f.name("graders") + "[" + std::to_string(i) + "]"));
  }
  for (size_t i = 0; i < c.graders.size(); ++i) {
    const std::string g = f.name("graders") + "[" + std::to_string(i) + "]";
    if (c.graders[i].name == "exact_length" && !c.ignore_eos)
      f.fail(g, "no exact_length without ignore_eos: the model may stop early");
    if ((c.graders[i].name == "arithmetic" && c.prompt.builder != "arithmetic") ||
        (c.graders[i].name == "needle" && c.prompt.builder != "needle") ||
        (c.graders[i].name == "structured_50" && c.prompt.builder != "structured") ||
        (c.graders[i].name == "tool_call" && c.prompt.builder != "tool_call") ||
        (c.graders[i].name == "json_schema" && c.prompt.builder != "json_schema"))
      f.fail(g, "a grader that matches prompt.builder \"" + c.prompt.builder + "\"");
    if ((c.graders[i].name == "determinism" || c.graders[i].name == "repetition_identical") &&
        !c.return_token_ids)
      f.fail(g, "return_token_ids: true (it compares token-id hashes)");
  }
  return c;
}

bool same_prompts(const CaseSpec& a, const CaseSpec& b) {
  return a.endpoint == b.endpoint && a.prompt.builder == b.prompt.builder &&
         a.prompt.seed == b.prompt.seed && a.prompt.tokens == b.prompt.tokens &&
         a.prompt.system_tokens == b.prompt.system_tokens &&
         a.prompt.sessions == b.prompt.sessions && a.prompt.echo_marker == b.prompt.echo_marker &&
         a.prompt.constrained == b.prompt.constrained && a.prompt.depth == b.prompt.depth &&
         a.requests == b.requests && a.warm_replay == b.warm_replay &&
         a.fresh_each_repetition == b.fresh_each_repetition &&
         a.chat_template_kwargs == b.chat_template_kwargs;
}

}  // namespace

const char* to_string(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "chat" : "completions";
}

const char* endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions";
}

const CaseSpec* WorkloadSpec::find_case(const std::string& case_id) const {
  for (const CaseSpec& c : cases)
    if (c.id == case_id) return &c;
  return nullptr;
}

WorkloadSpec parse_workload(const json& j, const std::string& source) {
  const Fields f(j, source, "", {"schema", "id", "title", "description", "gate", "cases"});
  WorkloadSpec w;
  w.source = source;
  w.schema = f.text("schema");
  if (w.schema != kWorkloadSchema)
    f.fail("schema", std::string("\"") + kWorkloadSchema + "\" (got \"" + w.schema + "\")");
  w.id = f.text("id");
  if (!std::regex_match(w.id, kWorkloadId))
    f.fail("id", "^[a-z0-9][a-z0-9._-]*$ (got \"" + w.id + "\")");
  w.title = f.text("title");
  const std::string empty;
  w.description = f.text("description", &empty);
  w.gate = f.boolean("gate", false);
  if (!f.has("cases") || !f.at("cases").is_array() || f.at("cases").empty())
    f.fail("cases", "a non-empty array of cases");
  std::map<std::string, size_t> ids, salts;
  for (size_t i = 0; i < f.at("cases").size(); ++i) {
    const std::string path = "cases[" + std::to_string(i) + "]";
    CaseSpec c = parse_case(f.at("cases")[i], source, path, w.gate);
    if (ids.count(c.id))
      f.fail(path + ".id",
             "unique (\"" + c.id + "\" is also cases[" + std::to_string(ids[c.id]) + "].id)");
    ids[c.id] = i;
    // One salt, one set of prompts: sharing a salt is how two cases say "same prompts".
    if (auto it = salts.find(c.salt); it != salts.end() && !same_prompts(w.cases[it->second], c))
      f.fail(path + ".salt", "unique, or shared only by cases with identical prompts (\"" + c.salt +
                                 "\" is also cases[" + std::to_string(it->second) + "].salt)");
    salts.emplace(c.salt, i);
    w.cases.push_back(std::move(c));
  }
  for (size_t i = 0; i < w.cases.size(); ++i) {
    for (size_t k = 0; k < w.cases[i].graders.size(); ++k) {
      const GraderSpec& g = w.cases[i].graders[k];
      if (g.name != "determinism") continue;
      const std::string path =
          "cases[" + std::to_string(i) + "].graders[" + std::to_string(k) + "].reference_case";
      const std::string ref = g.params["reference_case"].get<std::string>();
      const CaseSpec* r = w.find_case(ref);
      if (!r || r->id == w.cases[i].id)
        f.fail(path, "the id of another case of this workload (got \"" + ref + "\")");
      if (r->salt != w.cases[i].salt)
        f.fail(path, "a case with the same salt (\"" + w.cases[i].salt +
                         "\"), so that both send the same prompts");
    }
  }
  return w;
}

WorkloadSpec load_workload(const std::string& path) {
  const std::string text = read_json_text(path, ErrorKind::kInvalidConfig, json_limits::kWorkload);
  const json j = parse_json(text, path, ErrorKind::kInvalidConfig, json_limits::kWorkload);
  WorkloadSpec w = parse_workload(j, path);
  const std::string stem = std::filesystem::path(path).stem().string();
  if (w.id != stem)
    throw Error(ErrorKind::kInvalidConfig,
                path + ": id: expected the file's name \"" + stem + "\" (got \"" + w.id + "\")");
  w.sha256 = sha256_hex(text);
  return w;
}

std::vector<std::string> workload_files(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path().string());
  if (ec) throw Error(ErrorKind::kIo, dir + ": cannot list the folder (" + ec.message() + ")");
  std::sort(files.begin(), files.end());
  return files;
}

WorkloadSpec scaled(const WorkloadSpec& spec, double scale) {
  if (!(scale > 0 && scale <= 1))
    throw Error(ErrorKind::kInvalidArgument,
                "scale: expected a number in (0, 1] (got " + json(scale).dump() + ")");
  auto round_down_to = [&](int32_t value, int32_t floor) {
    const int32_t s = int32_t(std::lround(double(value) * scale));
    return std::min(value, std::max(floor, s));
  };
  WorkloadSpec w = spec;
  w.scale = spec.scale * scale;
  for (CaseSpec& c : w.cases) {
    for (int32_t& t : c.prompt.tokens) t = round_down_to(t, c.prompt.min_tokens);
    if (c.prompt.system_tokens > 0)
      c.prompt.system_tokens = round_down_to(c.prompt.system_tokens, c.prompt.min_tokens);
    c.max_tokens = round_down_to(c.max_tokens, std::min(8, c.max_tokens));
    c.repetitions = round_down_to(c.repetitions, c.min_repetitions);
    c.warmups = round_down_to(c.warmups, std::min(1, c.warmups));
  }
  return w;
}

}  // namespace sparkglm::workloads
