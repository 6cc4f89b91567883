#include "operator/recipe.h"

#include <initializer_list>
#include <set>

#include "engine/core/error.h"
#include "engine/core/shell_words.h"

namespace sparkglm::operator_tool {

using nlohmann::json;

namespace {

// The names publishers use for each field, most specific first; "a.b" is a nested field.
const std::initializer_list<const char*> kCommandFields = {"inference.command",
                                                           "inference.serve_command",
                                                           "serve.command",
                                                           "launch.command",
                                                           "serve_command",
                                                           "command",
                                                           "cmd",
                                                           "argv",
                                                           "args",
                                                           "run_command"};
const std::initializer_list<const char*> kEnvFields = {
    "inference.env", "inference.environment", "serve.env", "launch.env", "environment", "env"};
const std::initializer_list<const char*> kRepoFields = {
    "model.repo", "model.id", "model.name", "model.repository", "model_repo", "model_id",
    "hf_repo",    "repo",     "model"};
const std::initializer_list<const char*> kRevisionFields = {
    "model.revision", "model.commit", "model.sha", "model_revision", "revision"};
const std::initializer_list<const char*> kQuantFields = {
    "model.quant", "model.quantization", "quantization", "quant", "precision", "dtype"};
const std::initializer_list<const char*> kContextFields = {"context",       "context_length",
                                                           "context_len",   "max_context",
                                                           "max_model_len", "inference.context"};
const std::initializer_list<const char*> kConcurrencyFields = {
    "max_concurrency", "concurrency", "max_concurrent_requests", "inference.concurrency"};

struct Lookup {
  const json* value = nullptr;
  std::string field;
};

Lookup find(const json& root, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const json* at = &root;
    std::string path = name;
    for (size_t start = 0; at && start <= path.size();) {
      const size_t dot = std::min(path.find('.', start), path.size());
      const std::string key = path.substr(start, dot - start);
      at = at->is_object() && at->contains(key) ? &(*at)[key] : nullptr;
      start = dot + 1;
    }
    if (at && !at->is_null()) return {at, name};
  }
  return {};
}

std::string text_of(const Lookup& l) {
  if (!l.value) return "";
  if (l.value->is_string()) return l.value->get<std::string>();
  if (l.value->is_number() || l.value->is_boolean()) return l.value->dump();
  return "";
}

// A count the recipe states: a non-negative whole number below 2^40 (far above any context length
// or concurrency), so that neither 2^64 - 1 read as int64_t nor a "K"/"M" multiple can wrap.
std::optional<int64_t> count_of(const Lookup& l, const std::string& where) {
  constexpr int64_t kMaxCount = int64_t(1) << 40;
  if (!l.value) return std::nullopt;
  const auto bounded = [](int64_t n) { return n >= 0 && n <= kMaxCount; };
  if (l.value->is_number_unsigned()) {  // read as uint64_t: 2^64 - 1 would be -1 as int64_t
    if (l.value->get<uint64_t>() <= uint64_t(kMaxCount)) return l.value->get<int64_t>();
  } else if (l.value->is_number_integer()) {
    if (bounded(l.value->get<int64_t>())) return l.value->get<int64_t>();
  } else if (l.value->is_string()) {
    // "1M", "128K" and "131072" are all seen in the wild.
    const std::string s = l.value->get<std::string>();
    size_t used = 0;
    try {
      const long long n = std::stoll(s, &used);
      const std::string unit = s.substr(used);
      const int64_t scale = unit.empty()                   ? 1
                            : (unit == "K" || unit == "k") ? 1024
                            : (unit == "M" || unit == "m") ? 1024 * 1024
                                                           : 0;
      if (scale != 0 && bounded(n) && n <= kMaxCount / scale) return n * scale;
    } catch (const std::exception&) {
    }
  }
  throw Error(
      ErrorKind::kInvalidConfig,
      where + ": " + l.field + ": expected a whole number from 0 to 2^40, got " + l.value->dump());
}

}  // namespace

Recipe parse_recipe(const json& root, const std::string& where) {
  if (!root.is_object()) throw Error(ErrorKind::kInvalidConfig, where + ": expected a JSON object");
  Recipe r;
  std::set<std::string> used;
  auto mark = [&](const Lookup& l) {
    if (l.value) used.insert(l.field.substr(0, l.field.find('.')));
    return l;
  };
  r.id = text_of(mark(find(root, {"id", "slug"})));
  r.title = text_of(mark(find(root, {"title", "name"})));

  const Lookup command = mark(find(root, kCommandFields));
  if (!command.value) {
    std::string names;
    for (const char* n : kCommandFields) names += (names.empty() ? "" : ", ") + std::string(n);
    throw Error(ErrorKind::kInvalidConfig,
                where + ": the recipe has no serve command (looked for " + names + ")");
  }
  r.command_field = command.field;
  if (command.value->is_string()) {
    r.command = split_shell_words(command.value->get<std::string>(), where + ": " + command.field);
  } else if (command.value->is_array()) {
    for (const json& word : *command.value) {
      if (!word.is_string())
        throw Error(
            ErrorKind::kInvalidConfig,
            where + ": " + command.field + ": expected a list of strings, got " + word.dump());
      r.command.push_back(word.get<std::string>());
    }
  } else {
    throw Error(ErrorKind::kInvalidConfig, where + ": " + command.field +
                                               ": expected a string or a list of strings, got " +
                                               command.value->dump());
  }
  if (r.command.empty())
    throw Error(ErrorKind::kInvalidConfig, where + ": " + command.field + ": the command is empty");

  const Lookup env = mark(find(root, kEnvFields));
  r.env_field = env.field;
  r.env = parse_env_assignments(env.value ? *env.value : json(), where + ": " + env.field);

  const Lookup repo = mark(find(root, kRepoFields));
  r.model_repo = text_of(repo);
  r.model_revision = text_of(mark(find(root, kRevisionFields)));
  r.quantization = text_of(mark(find(root, kQuantFields)));
  r.context_length = count_of(mark(find(root, kContextFields)), where);
  r.concurrency = count_of(mark(find(root, kConcurrencyFields)), where);
  if (const Lookup hw = mark(find(root, {"hardware", "gpus", "gpu"})); hw.value)
    r.hardware = *hw.value;
  if (const Lookup e = mark(find(root, {"engine", "runtime"})); e.value) r.engine = *e.value;
  const Lookup notes = mark(find(root, {"notes", "description", "summary"}));
  if (notes.value)
    r.notes = notes.value->is_string() ? notes.value->get<std::string>() : notes.value->dump();
  r.published_at = text_of(mark(find(root, {"source", "url", "link"})));
  for (const char* known : {"schema", "$schema", "version", "inference"}) used.insert(known);
  for (const auto& [key, _] : root.items()) {
    if (!used.count(key)) r.unread_fields.push_back(key);
  }
  return r;
}

}  // namespace sparkglm::operator_tool
