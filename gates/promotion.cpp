#include "gates/promotion.h"

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "engine/options/profile.h"
#include "gates/gate_definition.h"
#include "gates/verdict_rederivation.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/qualification_record.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;
using receipts::Problem;
using receipts::Problems;

// The candidate's effective configuration as the server printed it, from the bundle.
std::optional<nlohmann::json> candidate_config(const fs::path& bundle) {
  const fs::path p = bundle / "server" / "candidate" / "effective-config.json";
  if (!fs::exists(p)) return std::nullopt;
  try {
    return parse_json(receipts::read_file(p), p.string(), ErrorKind::kInvalidArgument,
                      json_limits::kReceipt);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

Problems receipt_backs_option(const fs::path& bundle, const OptionSpec& option,
                              const OptionValue& value, const ChangeClassPolicy& policy,
                              const receipts::VerifyOptions& verification,
                              const std::string& expected_sha256) {
  const std::string where = bundle.filename().string();
  Problems problems = receipts::verify_bundle(bundle, verification);
  if (!problems.empty()) return problems;
  const std::string bytes = receipts::read_file(bundle / "qualification.json");
  const nlohmann::json record = parse_json_unique_keys(
      bytes, where + "/qualification.json", ErrorKind::kInvalidArgument, json_limits::kReceipt);
  auto add = [&](const std::string& field, const std::string& what) {
    problems.push_back({where + ": " + field, what});
  };
  if (!expected_sha256.empty() && sha256_hex(bytes) != expected_sha256)
    add("qualification.json", "sha256 " + sha256_hex(bytes) + " differs from the profile's " +
                                  expected_sha256 + " (the bundle changed after promotion)");
  const nlohmann::json& change = record.at("change");
  // A server measured through `run --url` was already running: its binary and profile were not
  // observed, so the bundle cannot say which server the numbers belong to.
  if (const auto cand = change.find("candidate");
      cand != change.end() && cand->is_object() && cand->value("observed", "") == "endpoint")
    add("change.candidate.observed",
        "\"endpoint\": measured through --url, the server's binary and profile were not "
        "observed; a promotion needs a server the harness started");
  const nlohmann::json opt = change.value("option", nlohmann::json());
  if (!opt.is_object() || opt.value("name", "") != option.name)
    add("change.option.name",
        "the receipt qualifies " +
            (opt.is_object() ? "\"" + opt.value("name", "") + "\"" : "no option") + ", not " +
            option.name);
  else if (!opt.contains("value") || !option.accepts(option.from_json(opt["value"], where)) ||
           option.from_json(opt["value"], where) != value)
    add("change.option.value", "the receipt qualifies " +
                                   opt.value("value", nlohmann::json()).dump() + ", not " +
                                   option.format(value));
  const auto config = candidate_config(bundle);
  if (!config)
    add("server/candidate/effective-config.json", "missing: the candidate's identity is unknown");
  else if (!config->contains(option.name) || (*config)[option.name] != option.to_json(value))
    add("server/candidate/effective-config.json",
        "the candidate ran with " + option.name + " = " +
            (config->contains(option.name) ? (*config)[option.name].dump() : "(unset)") + ", not " +
            option.format(value));
  const ChangeClass& cls = policy.for_option(option.name);
  const std::string state = record.value("state", "");
  if (state != "accepted" && state != "promoted")
    add("state", "\"" + state + "\": only an accepted (attested) receipt promotes");
  int needed = 0;
  for (const std::string& g : cls.to_change_default) needed = std::max(needed, gate_level(g));
  const std::string level = record.value("level", "G0");
  if (!is_gate_id(level) || gate_level(level) < needed)
    add("level", level + " is below G" + std::to_string(needed) + ", which change class " +
                     cls.name + " needs to change a default");
  for (const std::string& g : cls.to_change_default) {
    std::string status = "absent";
    for (const auto& gate : record.value("gates", nlohmann::json::array()))
      if (gate.value("id", "") == g) status = gate.value("status", "");
    if (status != "pass")
      add("gates." + g, "status " + status + "; change class " + cls.name + " needs it to pass");
  }
  for (const auto& m : record.value("metrics", nlohmann::json::array()))
    if (m.value("verdict", "") == "worse")
      add("metrics." + m.value("name", "") + "@" + m.value("case", ""),
          "a protected metric regressed (verdict worse)");
  return problems;
}

void promote(const PromoteRequest& request) {
  const OptionRegistry& registry = serving_options();
  const OptionSpec& option = registry.at(request.option);
  if (option.section != ProfileSection::kOptions)
    throw Error(ErrorKind::kInvalidArgument,
                "--option " + option.name +
                    ": only behaviour options (a profile's \"options\") "
                    "are promoted; limits and server arguments are sizing, not defaults");
  const OptionValue value = option.parse(request.value, "--value");
  const ChangeClassPolicy policy = ChangeClassPolicy::load(request.gates.string());
  const Profile profile = Profile::load(request.profile, request.profile_dir, registry);

  const fs::path bundle = fs::weakly_canonical(request.receipt);
  const fs::path results = fs::weakly_canonical(request.receipts / "results");
  if (bundle.parent_path() != results)
    throw Error(ErrorKind::kInvalidArgument, "--receipt " + request.receipt.string() +
                                                 ": a promotion cites a committed bundle; "
                                                 "put it under " +
                                                 results.string() +
                                                 "/ and rebuild the index first");
  const Problems problems = receipt_backs_option(
      bundle, option, value, policy,
      full_verification(
          request.trusted_keys.empty() ? request.receipts / "keys" : request.trusted_keys,
          request.gates));
  if (!problems.empty()) {
    std::string text = "the receipt does not back " + option.name + " = " + request.value + ":";
    for (const Problem& p : problems) text += "\n  " + p.to_string();
    throw Error(ErrorKind::kInvalidArgument, text);
  }

  const std::string old_bytes = receipts::read_file(profile.path());
  nlohmann::ordered_json j = parse_ordered_json(old_bytes, profile.path(),
                                                ErrorKind::kInvalidConfig, json_limits::kProfile);
  j["options"][option.name] = option.to_json(value);
  j["promotions"][option.name] = {
      {"value", option.to_json(value)},
      {"receipt_id", bundle.filename().string()},
      {"receipt_sha256", sha256_hex(receipts::read_file(bundle / "qualification.json"))}};
  const std::string new_bytes = j.dump(2) + "\n";
  Profile::parse(new_bytes, profile.path(), registry);  // an invalid result writes nothing
  receipts::write_file_atomically(profile.path(), new_bytes);
}

}  // namespace sparkglm::gates
