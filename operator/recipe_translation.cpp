#include "operator/recipe_translation.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>

#include "engine/core/error.h"
#include "engine/options/option_registry.h"
#include "engine/options/profile.h"
#include "operator/recipe_speculation.h"
#include "operator/secret_redaction.h"

namespace sparkglm::operator_tool {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

// Other engines' names for our options (vLLM, SGLang).
const std::map<std::string, std::string> kAliases = {
    {"tensor-parallel-size", "tp-size"},
    {"tp", "tp-size"},
    {"max-model-len", "max-seq-len"},
    {"context-length", "max-seq-len"},
    {"host", "bind"},
    {"kernel-target", "preset"},
    {"model-path", "model"},
    // The seed engine's KDA ("SSM") state cache is our prefix cache's snapshot store: the number
    // of snapshots kept warm, and the extra snapshot interval (0 = only at prompt ends and branch
    // points in both; ours counts 64-token chunks).
    {"ssm-cache-slots", "prefix-cache-snapshots"},
    {"ssm-checkpoint-interval", "prefix-snapshot-every"}};

// The seed recipe's own environment knobs for our options: its start.sh turns PREFIX_CACHE_DIR and
// PREFIX_CACHE_GB into its disk tier (ATLAS_KV_NVME_* and ATLAS_SSM_TIER_*, which stay notes: they
// split the size between a KV and a state directory; ours keeps blocks and snapshots in one).
const std::map<std::string, std::string> kEnvAliases = {{"PREFIX_CACHE_DIR", "prefix-cache-dir"},
                                                        {"PREFIX_CACHE_GB", "prefix-cache-gb"}};

// Why a flag some engine knows has no SparkGLM counterpart. A trailing '*' matches a prefix.
const std::pair<const char*, const char*> kReasons[] = {
    {"ep-size",
     "expert parallelism is not a separate option: the tp-size ranks split the routed experts"},
    // Speculative decoding's flags: recipe_speculation.h.
    {"ssm-*", "KDA state is FP32 with one slot per sequence (max-num-seqs); nothing to choose"},
    {"oom-guard-mb", "memory is sized by gpu-memory-utilization and kv-cache-memory-bytes"},
    {"swap-space*", "SparkGLM does not swap KV blocks to host memory"},
    {"auto-swap", "SparkGLM does not swap KV blocks to host memory"},
    {"gpu-ordinal", "devices are assigned by rank; there is no per-process device ordinal"},
    {"tui", "SparkGLM has no terminal UI"},
    {"lm-head-dtype", "weight formats follow precision_mode; no per-tensor dtype option"},
    {"video-*", "the model is served as text-only; no video input"},
    {"vision-*", "the model is served as text-only; no image input"},
    {"tool-call-parser", "the tool-call parser follows the model; no option selects it"},
    {"enable-auto-tool-choice",
     "tool calls are always parsed out of GLM's markup (tool_choice auto); nothing to enable"},
    {"guided-decoding-backend", "structured output is built in (text/grammar); no backend to pick"},
    {"structured-outputs-config*",
     "structured output is built in (text/grammar); no backend to pick"},
    {"reasoning-parser", "the reasoning parser follows the model; no option selects it"},
    {"served-model-name", "the model id follows the preset (glm-5.3-flash)"},
    {"trust-remote-code", "SparkGLM runs no code from a checkpoint"},
};

// Keys that make the dynamic loader, an interpreter or a shell run other code.
const char* const kRefusedKeys[] = {
    "PATH",    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PERL5LIB",         "PERL5OPT",
    "RUBYLIB", "RUBYOPT",    "NODE_PATH",  "NODE_OPTIONS",  "BASH_ENV",         "ENV",
    "IFS",     "SHELL",      "GCONV_PATH", "LOCPATH",       "NLSPATH",          "HOSTALIASES",
    "TMPDIR",  "HOME",       "CUDA_PATH",  "CUDA_HOME",     "JAVA_TOOL_OPTIONS"};

std::string reason_for(const std::string& flag_name, const OptionRegistry& registry) {
  std::string name = flag_name;
  if (name.rfind("no-", 0) == 0) name = name.substr(3);
  for (const auto& [pattern, reason] : kReasons) {
    const std::string p = pattern;
    if (p.back() == '*' ? name.rfind(p.substr(0, p.size() - 1), 0) == 0 : name == p) return reason;
  }
  const std::string near = registry.suggest(name);
  return "no SparkGLM option of this name" +
         (near.empty() ? "" : " (did you mean --" + near + "?)");
}

std::string section_key(const OptionSpec& spec) {
  std::string key = spec.name;
  if (spec.section == ProfileSection::kLimits) std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

std::string field_name(const OptionSpec& spec) {
  if (spec.section == ProfileSection::kTopLevel)
    return spec.name == "precision-mode" ? "precision_mode" : "model";
  return std::string(to_string(spec.section)) + "." + section_key(spec);
}

bool mentions_gpu(const nlohmann::json& hardware) {
  std::string text = hardware.is_string() ? hardware.get<std::string>() : hardware.dump();
  for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"nvidia", "gpu", "cuda", "dgx", "h100", "h200", "gb10", "a100"})
    if (text.find(word) != std::string::npos) return true;
  return false;
}

bool names_glm_flash(std::string text) {
  for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
  return text.find("glm-5.3-flash") != std::string::npos;
}

// The state of one translation: the options set so far and the report lines.
struct Builder {
  const OptionRegistry& registry;
  ProfileDraft& draft;
  std::map<std::string, OptionValue> values;  // by registry name
  std::map<std::string, std::string> set_by;  // registry name -> what set it
  std::string model_ref;                      // the recipe's model path or --model value

  void set(const OptionSpec& spec, const std::string& text, const std::string& origin) {
    const OptionValue v = spec.parse(text, "recipe " + origin);
    if (spec.status == OptionStatus::kRejected && v != spec.default_value)
      throw Error(ErrorKind::kInvalidConfig, "recipe " + origin + ": --" + spec.name +
                                                 " was rejected in qualification; only its "
                                                 "default may be set");
    if (auto it = values.find(spec.name); it != values.end() && it->second != v)
      draft.inferred.push_back(origin + " replaces " + set_by[spec.name] + " (the later wins)");
    values[spec.name] = v;
    set_by[spec.name] = origin;
    draft.applied.push_back(origin + " -> " + field_name(spec) + " = " + spec.format(v));
  }

  void flag(const std::string& written, std::string name, const std::optional<std::string>& value) {
    // Speculative decoding: other engines' flags for it become --speculative-tokens.
    const SpeculativeFlag speculative = speculative_flag(name, value);
    switch (speculative.kind) {
      case SpeculativeFlag::Kind::kSet:
        set(registry.at("speculative-tokens"), speculative.text, written);
        return;
      case SpeculativeFlag::Kind::kNote:
        draft.inferred.push_back(written + ": " + speculative.text);
        return;
      case SpeculativeFlag::Kind::kUnsupported:
        draft.unsupported.push_back(written + ": " + speculative.text);
        return;
      case SpeculativeFlag::Kind::kOther:
        break;
    }
    if (auto a = kAliases.find(name); a != kAliases.end()) name = a->second;
    const OptionSpec* spec = registry.find(name);
    bool negated = false;
    if (!spec && name.rfind("no-", 0) == 0) {
      spec = registry.find(name.substr(3));
      negated = spec && spec->type == OptionType::kBool;
      if (!negated) spec = nullptr;
    }
    if (spec && spec->name == "model") {
      model_ref = value.value_or("");
      return;
    }
    if (!spec) {
      draft.unsupported.push_back(written + ": " + reason_for(name, registry));
      return;
    }
    if (spec->section == ProfileSection::kCommandLineOnly) {
      draft.unsupported.push_back(written + ": --" + spec->name +
                                  " is set on the command line only, never in a profile");
      return;
    }
    if (spec->name == "preset" && value && !spec->accepts(*value)) {
      draft.unsupported.push_back(written + ": not a SparkGLM preset (" + spec->expected() + ")");
      return;
    }
    std::string text = value.value_or("true");
    if (negated) {
      if (value)
        throw Error(ErrorKind::kInvalidConfig, "recipe flag " + written + " takes no value");
      text = "false";
    }
    set(*spec, text, written);
  }
};

}  // namespace

std::string profile_name_from(const std::string& text) {
  std::string out;
  for (char ch : text) {
    const char c = char(std::tolower(static_cast<unsigned char>(ch)));
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_';
    if (ok)
      out += c;
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.front()))) out.erase(0, 1);
  while (!out.empty() && (out.back() == '-' || out.back() == '.')) out.pop_back();
  return out;
}

std::string refused_env_reason(const std::string& key) {
  if (key.rfind("LD_", 0) == 0 || key.rfind("DYLD_", 0) == 0)
    return "would make the dynamic loader load other code into the engine";
  for (const char* k : kRefusedKeys)
    if (key == k) return "could change which programs or libraries run";
  return "";
}

ProfileDraft translate_recipe(const Recipe& recipe, const FetchedRecipe& fetched,
                              const TranslationOptions& options, const std::string& profile_dir) {
  const OptionRegistry& registry = serving_options();
  ProfileDraft draft;
  draft.name = options.name.empty()
                   ? profile_name_from(!recipe.id.empty() ? recipe.id : recipe.title)
                   : options.name;
  if (!ReceiptRef::is_id(draft.name))
    throw Error(ErrorKind::kInvalidArgument,
                "profile name \"" + draft.name +
                    "\": expected [a-z0-9][a-z0-9._-]*, a file inside the profile folder " +
                    "(pass --name NAME)");
  Builder b{registry, draft, {}, {}, ""};

  // argv: [K=V ...] program [subcommand words] [model] flags...
  std::vector<EnvAssignment> command_env;
  size_t i = 0;
  for (; i < recipe.command.size(); ++i) {
    const std::string& w = recipe.command[i];
    const size_t eq = w.find('=');
    if (eq == std::string::npos || !is_env_key(w.substr(0, eq))) break;
    command_env.push_back({w.substr(0, eq), w.substr(eq + 1)});
  }
  const std::string program = i < recipe.command.size() ? recipe.command[i++] : "";
  for (; i < recipe.command.size(); ++i) {
    const std::string& w = recipe.command[i];
    if (w.rfind("--", 0) != 0) {
      if (w == "serve" || w == "run" || w == "launch") continue;  // subcommand words
      if (b.model_ref.empty() && !w.empty() && w.front() != '-') {
        b.model_ref = w;
      } else {
        draft.unsupported.push_back(w + ": an argument SparkGLM does not take");
      }
      continue;
    }
    const size_t eq = w.find('=');
    std::string name = w.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> value;
    std::string written = w;
    const OptionSpec* named = registry.find(name);
    // A key on the command line is reported as its flag alone (it is never applied either).
    const bool secret = is_secret_name(name) || (named && named->secret);
    if (eq != std::string::npos) {
      value = w.substr(eq + 1);
      if (secret) written = w.substr(0, eq + 1) + kRedacted;
    } else {
      std::string canonical = name;
      if (auto a = kAliases.find(name); a != kAliases.end()) canonical = a->second;
      const OptionSpec* spec = registry.find(canonical);
      const bool takes_value =
          spec ? spec->type != OptionType::kBool
               : i + 1 < recipe.command.size() && recipe.command[i + 1].rfind("-", 0) != 0;
      if (takes_value && i + 1 < recipe.command.size()) {
        value = recipe.command[++i];
        written += " " + (secret ? std::string(kRedacted) : *value);
      }
    }
    b.flag(written, name, value);
  }

  // The environment: the recipe's own, then assignments written before the program.
  std::vector<EnvAssignment> env = recipe.env.assignments;
  env.insert(env.end(), command_env.begin(), command_env.end());
  for (const std::string& line : recipe.env.skipped) {
    // "KEY=VALUE: why" or "KEY: why": a secret's line keeps only its key.
    const std::string key = line.substr(0, line.find_first_of("=:"));
    draft.env_skipped.push_back(is_secret_name(key) ? key + ": " + kRedacted : redact_text(line));
  }
  ordered_json env_notes = ordered_json::object();
  ordered_json refused = ordered_json::array();
  for (const EnvAssignment& a : env) {
    if (const std::string why = refused_env_reason(a.key); !why.empty()) {
      const std::string shown = is_secret_name(a.key) ? kRedacted : a.value;
      draft.refused_env.push_back(a.key + "=" + shown + ": refused, " + why);
      refused.push_back({{"key", a.key}, {"value", shown}, {"reason", why}});
      continue;
    }
    std::string option;
    if (a.key.rfind("SPARKGLM_", 0) == 0) {
      option = a.key.substr(9);
      for (char& c : option) c = c == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
    } else if (const auto e = kEnvAliases.find(a.key); e != kEnvAliases.end()) {
      option = e->second;
    }
    const OptionSpec* spec = option.empty() ? nullptr : registry.find(option);
    if (spec && spec->section != ProfileSection::kCommandLineOnly && spec->name != "model") {
      const std::string origin = a.key + "=" + a.value;
      if (b.values.count(spec->name))
        draft.inferred.push_back(origin + " is not applied: " + b.set_by[spec->name] + " sets --" +
                                 spec->name + " (the command's flag wins)");
      else
        b.set(*spec, a.value, origin);
      continue;
    }
    if (spec && spec->section == ProfileSection::kCommandLineOnly) {
      const std::string why = "--" + spec->name +
                              " is set on the command line only, never in a "
                              "profile";
      const std::string shown = spec->secret || is_secret_name(a.key) ? kRedacted : a.value;
      draft.refused_env.push_back(a.key + "=" + shown + ": refused, " + why);
      refused.push_back({{"key", a.key}, {"value", shown}, {"reason", why}});
      continue;
    }
    draft.env_notes.push_back(a.key);
    env_notes[a.key] = is_secret_name(a.key) ? kRedacted : a.value;
  }

  // Fields beside the command fill what its flags left unset.
  auto fill = [&](const char* option, const std::optional<int64_t>& value, const std::string& why) {
    if (!value) return;
    const OptionSpec& spec = registry.at(option);
    if (!b.values.count(option)) {
      b.set(spec, std::to_string(*value), why);
    } else if (b.values[option] != OptionValue(*value)) {
      draft.inferred.push_back(why + " differs from " + b.set_by[option] + "; the flag is kept");
    }
  };
  fill("max-seq-len", recipe.context_length,
       "recipe context length " + std::to_string(recipe.context_length.value_or(0)));
  fill("max-num-seqs", recipe.concurrency,
       "recipe concurrency " + std::to_string(recipe.concurrency.value_or(0)));
  for (const char* limit : {"max-num-seqs", "max-seq-len", "max-prefill-tokens"}) {
    const OptionSpec& spec = registry.at(limit);
    if (b.values.count(limit)) continue;
    b.values[limit] = spec.default_value;
    draft.inferred.push_back(field_name(spec) + " = " + spec.format(spec.default_value) +
                             ": the recipe does not state it; the engine default is written");
  }
  if (!b.values.count("device") && mentions_gpu(recipe.hardware)) {
    b.values["device"] = std::string("cuda");
    draft.inferred.push_back("server_args.device = cuda: the recipe's hardware names a GPU");
  }

  // The model: an explicit local checkpoint, a preset flag, or the preset the recipe's model names.
  std::string model;
  if (!options.model_dir.empty()) {
    model = fs::absolute(options.model_dir).lexically_normal().string();
    b.values.erase("preset");
  } else if (auto it = b.values.find("preset"); it != b.values.end()) {
    model = std::get<std::string>(it->second);
    b.values.erase(it);
  } else if (names_glm_flash(recipe.model_repo) || names_glm_flash(b.model_ref)) {
    model = "glm-5.3-flash";
    draft.inferred.push_back("model = glm-5.3-flash: the recipe's model " +
                             (recipe.model_repo.empty() ? b.model_ref : recipe.model_repo) +
                             " is GLM-5.3-Flash");
  } else {
    throw Error(ErrorKind::kInvalidConfig, "recipe: cannot tell which model it serves (model \"" +
                                               recipe.model_repo + "\", path \"" + b.model_ref +
                                               "\"); pass --model DIR to name a local checkpoint");
  }
  if (!b.model_ref.empty() && options.model_dir.empty())
    draft.inferred.push_back("the recipe's model path " + b.model_ref +
                             " is on the publisher's machine and is not used (--model DIR names "
                             "a local checkpoint)");
  if (!recipe.quantization.empty())
    draft.inferred.push_back("the recipe's quantization " + recipe.quantization +
                             " is recorded, not applied: weight formats follow the checkpoint "
                             "and precision_mode");
  std::string precision = "strict";
  if (auto it = b.values.find("precision-mode"); it != b.values.end()) {
    precision = std::get<std::string>(it->second);
    b.values.erase(it);
  }

  ordered_json limits = ordered_json::object(), opts = ordered_json::object(),
               server = ordered_json::object();
  for (const OptionSpec& spec : registry.specs()) {  // table order, like the shipped profiles
    const auto it = b.values.find(spec.name);
    if (it == b.values.end()) continue;
    ordered_json& section = spec.section == ProfileSection::kLimits    ? limits
                            : spec.section == ProfileSection::kOptions ? opts
                                                                       : server;
    section[section_key(spec)] = ordered_json(spec.to_json(it->second));
  }
  ordered_json unsupported = ordered_json::array();
  for (const std::string& line : draft.unsupported) {
    const size_t colon = line.find(": ");
    unsupported.push_back({{"flag", line.substr(0, colon)}, {"reason", line.substr(colon + 2)}});
  }
  ordered_json recipe_record = {{"id", recipe.id},
                                {"title", recipe.title},
                                {"published_at", recipe.published_at},
                                {"engine", ordered_json(recipe.engine)},
                                {"model_repo", recipe.model_repo},
                                {"model_revision", recipe.model_revision},
                                {"model_path", b.model_ref},
                                {"quantization", recipe.quantization},
                                {"hardware", ordered_json(recipe.hardware)},
                                {"program", program},
                                {"command", redact_argv(recipe.command)},
                                {"notes", redact_text(recipe.notes)}};
  const std::string title = recipe.title.empty() ? recipe.id : recipe.title;
  draft.profile = {
      {"name", draft.name},
      {"description", "Imported from the recipe \"" + title + "\" (" + fetched.source + ")."},
      {"model", model},
      {"precision_mode", precision},
      {"limits", limits},
      {"options", opts},
      {"server_args", server},
      {"promotions", ordered_json::object()},
      {"provenance",
       {{"source", fetched.source},
        {"sha256", fetched.sha256},
        {"fetched_at", fetched.fetched_at},
        {"tool", "sparkglm recipe apply"},
        {"recipe", recipe_record},
        {"unsupported_flags", unsupported},
        {"refused_environment", refused},
        {"environment_notes", env_notes},
        {"environment_skipped", draft.env_skipped},
        {"inferred", draft.inferred},
        {"unread_fields", recipe.unread_fields}}}};
  draft.text = draft.profile.dump(2) + "\n";
  // The registry has the last word: what it rejects is never written.
  Profile::parse(draft.text, (fs::path(profile_dir) / (draft.name + ".json")).string(), registry);
  return draft;
}

}  // namespace sparkglm::operator_tool
