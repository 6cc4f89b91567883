#include "engine/options/effective_config.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/sha256.h"

namespace sparkglm {

const char* to_string(ValueSource source) {
  switch (source) {
    case ValueSource::kBuiltin:
      return "built-in";
    case ValueSource::kProfile:
      return "profile";
    case ValueSource::kCommandLine:
      return "command line";
  }
  return "?";
}

namespace {

[[noreturn]] void bad_argument(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

// The flag users of other engines type for one of our options: the same option under its
// registry name (recipe apply translates more of them into profiles).
const std::pair<std::string_view, std::string_view> kFlagAliases[] = {
    {"tensor-parallel-size", "tp-size"}};

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args,
                               const OptionRegistry& registry) {
  CommandLine cli;
  std::set<std::string> given;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() <= 2 || arg.rfind("--", 0) != 0)
      bad_argument("unexpected argument \"" + arg +
                   "\" (options are --name value or --name=value)");
    const size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> text;
    if (eq != std::string::npos) text = arg.substr(eq + 1);

    for (const auto& [alias, option] : kFlagAliases)
      if (name == alias && registry.find(option)) name = option;
    const OptionSpec* spec = registry.find(name);
    bool negated = false;
    if (!spec && name.rfind("no-", 0) == 0 && !text) {
      spec = registry.find(name.substr(3));
      negated = spec && spec->type == OptionType::kBool;
      if (!negated) spec = nullptr;
    }
    if (!spec && name != "profile") registry.at(name);  // throws, naming the option
    const std::string key = spec ? spec->name : name;
    if (!given.insert(key).second) bad_argument("--" + key + " given twice");

    if (!text && !negated && (!spec || spec->type != OptionType::kBool)) {
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
        bad_argument("--" + name + ": expected a value (" +
                     (spec ? spec->expected() : std::string("a profile name or file")) + ")");
      text = args[++i];
    }
    if (!spec) {
      if (text->empty()) bad_argument("--profile: expected a profile name or file, got \"\"");
      cli.profile = *text;
    } else if (negated) {
      cli.values.push_back({key, false});
    } else {
      cli.values.push_back({key, text ? spec->parse(*text, "--" + key) : OptionValue(true)});
    }
  }
  return cli;
}

EffectiveConfig EffectiveConfig::resolve(const OptionRegistry& registry, const Profile* profile,
                                         const CommandLine& command_line) {
  EffectiveConfig c;
  c.registry_ = &registry;
  for (const OptionSpec& s : registry.specs())
    c.entries_[s.name] = {s.default_value, ValueSource::kBuiltin};
  std::string who;
  if (profile) {
    c.profile_name_ = profile->name();
    c.profile_path_ = profile->path();
    c.profile_sha256_ = profile->sha256();
    who = "profile " + profile->name();
    for (const auto& [name, value] : profile->values()) {
      SPARKGLM_ASSERT(registry.find(name), "profile parsed with another registry: " + name);
      c.entries_[name] = {value, ValueSource::kProfile};
    }
  }
  std::map<std::string, std::string> group_flag;  // group -> the flag that chose it
  std::set<std::string> given;
  for (const CommandLine::Value& flag : command_line.values) {
    const OptionSpec& spec = registry.at(flag.name);
    if (!given.insert(spec.name).second) bad_argument("--" + spec.name + " given twice");
    SPARKGLM_ASSERT(spec.accepts(flag.value), "command-line value of --" + spec.name);
    // The profile value this flag replaces: its own, or within a group whichever member it set.
    std::optional<OptionValue> replaced;
    std::string replaced_name = spec.name;
    if (!spec.group.empty()) {
      const auto [it, first] = group_flag.emplace(spec.group, spec.name);
      if (!first)
        bad_argument("--" + it->second + " and --" + spec.name + " are alternatives; give one");
      for (const OptionSpec& member : registry.specs()) {
        Entry& e = c.entries_[member.name];
        if (member.group != spec.group || e.source != ValueSource::kProfile) continue;
        replaced = e.value;
        replaced_name = member.name;
        e = {member.default_value, ValueSource::kBuiltin};
      }
    } else if (c.entries_[spec.name].source == ValueSource::kProfile) {
      replaced = c.entries_[spec.name].value;
    }
    if (replaced && *replaced != flag.value) {
      const OptionSpec& old_spec = registry.at(replaced_name);
      std::string line = "--" + spec.name + "=" + spec.format(flag.value) + " overrides " + who +
                         " value " + old_spec.format(*replaced);
      const auto promoted = profile->promotions().find(replaced_name);
      if (promoted != profile->promotions().end())
        line += " (qualified by receipt " + promoted->second.receipt.id + ")";
      c.log_lines_.push_back(line);
    }
    c.entries_[spec.name] = {flag.value, ValueSource::kCommandLine};
  }
  return c;
}

const EffectiveConfig::Entry& EffectiveConfig::entry(std::string_view name) const {
  const auto it = entries_.find(name);
  SPARKGLM_ASSERT(it != entries_.end(), "no option named " + std::string(name));
  return it->second;
}

const OptionValue& EffectiveConfig::value(std::string_view name) const {
  const Entry& e = entry(name);
  reads_.emplace(name);
  return e.value;
}
ValueSource EffectiveConfig::source(std::string_view name) const {
  return entry(name).source;
}

bool EffectiveConfig::boolean(std::string_view name) const {
  const bool* v = std::get_if<bool>(&value(name));
  SPARKGLM_ASSERT(v, "option " + std::string(name) + " is not a bool");
  return *v;
}

int64_t EffectiveConfig::integer(std::string_view name) const {
  const int64_t* v = std::get_if<int64_t>(&value(name));
  SPARKGLM_ASSERT(v, "option " + std::string(name) + " is not an integer");
  return *v;
}

double EffectiveConfig::number(std::string_view name) const {
  const double* v = std::get_if<double>(&value(name));
  SPARKGLM_ASSERT(v, "option " + std::string(name) + " is not a number");
  return *v;
}

const std::string& EffectiveConfig::str(std::string_view name) const {
  const std::string* v = std::get_if<std::string>(&value(name));
  SPARKGLM_ASSERT(v, "option " + std::string(name) + " is not a string");
  return *v;
}

nlohmann::json EffectiveConfig::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const OptionSpec& s : registry_->specs()) {
    if (s.per_rank) continue;
    const OptionValue& v = entry(s.name).value;
    out[s.name] = s.secret ? nlohmann::json(s.format(v)) : s.to_json(v);
  }
  return out;
}

std::string EffectiveConfig::sha256() const {
  return sha256_hex(canonical_json());
}

std::string EffectiveConfig::summary() const {
  const std::string profile =
      profile_name_.empty() ? "no profile"
                            : "profile " + profile_name_ + " (sha256 " + profile_sha256_ + ")";
  return profile + ", config sha256 " + sha256();
}

namespace {

// Names an option with its value and where the value came from, for errors about combinations.
std::string shown(const EffectiveConfig& c, const std::string& name) {
  const OptionSpec& spec = c.registry().at(name);
  std::string out = "--" + name + "=" + spec.format(c.value(name));
  if (c.source(name) == ValueSource::kProfile) out += " (profile " + c.profile_name() + ")";
  if (c.source(name) == ValueSource::kBuiltin) out += " (default)";
  return out;
}

void check_serving(const EffectiveConfig& c) {
  const bool preset = !c.str("preset").empty(), model = !c.str("model").empty();
  if (preset == model)
    bad_argument(
        "give exactly one model source: --preset NAME, --model DIR, or a --profile naming one");
  if (const int64_t layers = c.integer("num-layers"); layers != 0) {
    if (!preset) bad_argument(shown(c, "num-layers") + ": --num-layers applies to --preset only");
    if (layers % 4 != 0) bad_argument(shown(c, "num-layers") + ": expected a multiple of 4");
  }
  // Every rank is a tensor-parallel rank (the routed experts split over the same ranks).
  const int64_t world = c.integer("world-size"), tp = c.integer("tp-size");
  if (world != 1 && world != tp)
    bad_argument(shown(c, "world-size") + " differs from " + shown(c, "tp-size") +
                 ": every rank is a tensor-parallel rank (world-size is 1 or tp-size)");
  if (c.integer("rank") >= std::max(world, tp))
    bad_argument(shown(c, "rank") + " is not below " +
                 shown(c, tp > world ? "tp-size" : "world-size"));
  // The KV shard gives rank r the positions p % tp == r of every block: tp divides a block.
  if (tp > 1 && c.str("kv-shard") == "on" && c.integer("block-size") % tp != 0)
    bad_argument(shown(c, "block-size") + " is not divisible by " + shown(c, "tp-size") + " with " +
                 shown(c, "kv-shard") +
                 ": each rank stores every tp-size-th position of a block (use a multiple of "
                 "tp-size, or --kv-shard off)");
}

}  // namespace

EffectiveConfig parse_serve_args(const std::vector<std::string>& args,
                                 const std::string& profile_dir) {
  const OptionRegistry& registry = serving_options();
  const CommandLine cli = parse_command_line(args, registry);
  std::optional<Profile> profile;
  if (!cli.profile.empty()) {
    profile = Profile::load(cli.profile, profile_dir.empty() ? default_profile_dir() : profile_dir,
                            registry);
  }
  EffectiveConfig c = EffectiveConfig::resolve(registry, profile ? &*profile : nullptr, cli);
  check_serving(c);
  return c;
}

EffectiveConfig parse_serve_args(int argc, const char* const* argv,
                                 const std::string& profile_dir) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_serve_args(args, profile_dir);
}

}  // namespace sparkglm
