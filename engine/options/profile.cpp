#include "engine/options/profile.h"

#include <algorithm>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"

namespace sparkglm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kTopLevelFields[] = {"name",           "description", "model",
                                       "precision_mode", "limits",      "options",
                                       "server_args",    "promotions",  "provenance"};
// A profile states at least its sequences, context and prefill chunk (ARCHITECTURE.md).
const char* const kRequiredLimits[] = {"max-num-seqs", "max-seq-len", "max-prefill-tokens"};

bool is_name(const std::string& s) {
  return ReceiptRef::is_id(s);
}  // the same alphabet

std::string option_key(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

// How limits are spelled in the shipped profiles: "max-num-seqs" -> "max_num_seqs".
std::string limit_key(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

json parse_strict(std::string_view bytes, const std::string& path) {
  return parse_json_unique_keys(bytes, path, ErrorKind::kInvalidConfig, json_limits::kProfile);
}

[[noreturn]] void invalid(const std::string& path, const std::string& field,
                          const std::string& what) {
  throw Error(ErrorKind::kInvalidConfig, path + ": " + field + ": " + what);
}

const json& required(const json& root, const std::string& path, const char* field,
                     bool (json::*is_type)() const noexcept, const char* type) {
  const auto it = root.find(field);
  if (it == root.end()) invalid(path, field, std::string("missing (expected ") + type + ")");
  if (!((*it).*is_type)())
    invalid(path, field, std::string("expected ") + type + ", got " + it->dump());
  return *it;
}

std::string file_text(const std::string& path) {
  return read_json_text(path, ErrorKind::kInvalidConfig, json_limits::kProfile);
}

}  // namespace

std::string Profile::field_of(const std::string& option) const {
  const auto it = fields_.find(option);
  return it == fields_.end() ? "" : it->second;
}

Profile Profile::parse(std::string_view bytes, const std::string& path,
                       const OptionRegistry& registry) {
  const json root = parse_strict(bytes, path);
  if (!root.is_object()) throw Error(ErrorKind::kInvalidConfig, path + ": expected a JSON object");
  for (const auto& [key, _] : root.items()) {
    if (std::find(std::begin(kTopLevelFields), std::end(kTopLevelFields), key) ==
        std::end(kTopLevelFields))
      invalid(path, key,
              "unknown field (expected name, description, model, precision_mode, limits, options, "
              "server_args, promotions, provenance)");
  }
  Profile p;
  p.path_ = path;
  p.sha256_ = sha256_hex(bytes);

  p.name_ = required(root, path, "name", &json::is_string, "a string").get<std::string>();
  const std::string stem = fs::path(path).stem().string();
  if (!is_name(p.name_)) invalid(path, "name", "\"" + p.name_ + "\" is not [a-z0-9][a-z0-9._-]*");
  if (p.name_ != stem) invalid(path, "name", "\"" + p.name_ + "\" differs from the file name");
  p.description_ =
      required(root, path, "description", &json::is_string, "a string").get<std::string>();
  if (p.description_.empty()) invalid(path, "description", "expected a non-empty string");

  auto set = [&](const std::string& option, OptionValue v, const std::string& field) {
    if (!p.values_.emplace(option, std::move(v)).second)
      invalid(path, field, option + " is already set by " + p.fields_.at(option));
    p.fields_[option] = field;
  };

  // `model`: a preset name, or a checkpoint directory (a path, so it contains '/').
  const std::string model =
      required(root, path, "model", &json::is_string, "a string").get<std::string>();
  const OptionSpec& preset = registry.at("preset");
  if (preset.accepts(model)) {
    set("preset", model, "model");
  } else if (model.find('/') != std::string::npos) {
    fs::path dir = fs::path(model);
    if (dir.is_relative()) dir = fs::absolute(fs::path(path).parent_path()) / dir;
    set("model", dir.lexically_normal().string(), "model");
  } else {
    invalid(path, "model",
            "expected a preset (" + preset.expected() +
                ") or a checkpoint path containing '/', got \"" + model + "\"");
  }
  required(root, path, "precision_mode", &json::is_string, "a string");
  set("precision-mode",
      registry.at("precision-mode").from_json(root["precision_mode"], path + ": precision_mode"),
      "precision_mode");

  required(root, path, "limits", &json::is_object, "an object");
  const std::pair<const char*, ProfileSection> kSections[] = {
      {"limits", ProfileSection::kLimits},
      {"options", ProfileSection::kOptions},
      {"server_args", ProfileSection::kServerArgs}};
  for (const auto& [section_name, section] : kSections) {
    if (!root.contains(section_name)) continue;
    const json& entries = root[section_name];
    if (!entries.is_object())
      invalid(path, section_name, "expected an object, got " + entries.dump());
    for (const auto& [key, value] : entries.items()) {
      const std::string field = std::string(section_name) + "." + key;
      const std::string name = option_key(key);
      const OptionSpec* spec = registry.find(name);
      if (!spec) {
        const std::string near = registry.suggest(name);
        invalid(path, field,
                "unknown option" + (near.empty() ? "" : " (did you mean " + near + "?)"));
      }
      if (spec->section == ProfileSection::kCommandLineOnly)
        invalid(path, field, name + " is set on the command line only");
      if (spec->section == ProfileSection::kTopLevel)
        invalid(path, field, name + " is set by the profile's top-level field");
      if (spec->section != section)
        invalid(path, field, name + " belongs in " + to_string(spec->section));
      OptionValue v = spec->from_json(value, path + ": " + field);
      if (spec->status == OptionStatus::kRejected && v != spec->default_value)
        invalid(path, field,
                name + " was rejected in qualification; only its default " +
                    spec->format(spec->default_value) + " may be set");
      set(name, std::move(v), field);
    }
  }
  for (const char* limit : kRequiredLimits) {
    if (registry.find(limit) && !p.values_.count(limit))
      invalid(path, "limits." + limit_key(limit), "missing (a profile states its limits)");
  }

  if (root.contains("promotions")) {
    const json& records = root["promotions"];
    if (!records.is_object())
      invalid(path, "promotions", "expected an object, got " + records.dump());
    for (const auto& [key, record] : records.items()) {
      const std::string field = "promotions." + key;
      const std::string name = option_key(key);
      const auto it = p.values_.find(name);
      if (it == p.values_.end() || p.fields_.at(name).rfind("options.", 0) != 0)
        invalid(path, field, "the profile's options do not set " + name);
      if (!record.is_object() || record.size() != 3 || !record.contains("value") ||
          !record.contains("receipt_id") || !record.contains("receipt_sha256"))
        invalid(path, field, "expected {value, receipt_id, receipt_sha256}, got " + record.dump());
      const OptionSpec& spec = registry.at(name);
      if (!spec.not_implemented.empty())
        invalid(path, field,
                "--" + name + " is not implemented yet (" + spec.not_implemented +
                    "): there is nothing a receipt could qualify");
      PromotionRecord r;
      r.value = spec.from_json(record["value"], path + ": " + field + ".value");
      if (r.value != it->second)
        invalid(path, field + ".value",
                spec.format(r.value) + " differs from " + p.fields_.at(name) + " = " +
                    spec.format(it->second));
      const json& id = record["receipt_id"];
      const json& sha = record["receipt_sha256"];
      if (!id.is_string() || !ReceiptRef::is_id(id.get<std::string>()))
        invalid(path, field + ".receipt_id",
                "expected a bundle id [a-z0-9][a-z0-9._-]*, got " + id.dump());
      if (!sha.is_string() || !ReceiptRef::is_sha256(sha.get<std::string>()))
        invalid(path, field + ".receipt_sha256",
                "expected 64 lowercase hex digits, got " + sha.dump());
      r.receipt = {id.get<std::string>(), sha.get<std::string>()};
      p.promotions_.emplace(name, std::move(r));
    }
  }
  if (root.contains("provenance")) {
    // Where an imported profile came from (`sparkglm recipe apply`): a record for people, never
    // read as settings. Only the identity fields are checked.
    const json& record = root["provenance"];
    if (!record.is_object())
      invalid(path, "provenance", "expected an object, got " + record.dump());
    for (const char* field : {"source", "fetched_at", "sha256"}) {
      if (record.contains(field) && !record[field].is_string())
        invalid(path, std::string("provenance.") + field,
                "expected a string, got " + record[field].dump());
    }
    if (record.contains("sha256") && !ReceiptRef::is_sha256(record["sha256"].get<std::string>()))
      invalid(path, "provenance.sha256",
              "expected 64 lowercase hex digits, got " + record["sha256"].dump());
    p.provenance_ = record;
  }
  for (const auto& [name, value] : p.values_) {
    const OptionSpec& spec = registry.at(name);
    if (spec.section == ProfileSection::kOptions && value != spec.default_value &&
        !p.promotions_.count(name))
      p.unbacked_.push_back(name);
  }
  return p;
}

Profile Profile::load(const std::string& name_or_path, const std::string& profile_dir,
                      const OptionRegistry& registry) {
  if (is_profile_path(name_or_path)) return parse(file_text(name_or_path), name_or_path, registry);
  const fs::path file = fs::path(profile_dir) / (name_or_path + ".json");
  if (!is_name(name_or_path) || !fs::is_regular_file(file)) {
    std::string available;
    for (const std::string& n : profile_names(profile_dir))
      available += (available.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::kInvalidArgument,
                "--profile: no profile \"" + name_or_path + "\" in " + profile_dir +
                    " (available: " + (available.empty() ? "none" : available) + ")");
  }
  return parse(file_text(file.string()), file.string(), registry);
}

bool is_profile_path(const std::string& name_or_path) {
  const std::string suffix = ".json";
  return name_or_path.find('/') != std::string::npos ||
         (name_or_path.size() >= suffix.size() &&
          name_or_path.compare(name_or_path.size() - suffix.size(), suffix.size(), suffix) == 0);
}

std::vector<std::string> profile_names(const std::string& profile_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(profile_dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string default_profile_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "profiles", ec)) return (dir / "profiles").string();
      if (dir == dir.parent_path()) break;
    }
  }
  // This file is engine/options/profile.cpp: the source tree's profiles/ is three levels up.
  const fs::path source = fs::path(__FILE__).parent_path().parent_path().parent_path() / "profiles";
  if (source.is_absolute() && fs::is_directory(source, ec)) return source.string();
  return "profiles";
}

}  // namespace sparkglm
