#pragma once
// Every behaviour switch of `sparkglm-serve` is a typed option in one table (option_registry.cpp):
// its name (the flag without `--`), type, default, range or allowed values, help, qualification
// status, and where a profile may set it. Values are parsed here; errors name the option and what
// was expected. Options come from flags and profiles only, never from environment variables.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace sparkglm {

// kBool: true|false. kInt: a decimal integer. kBytes: a byte count, written "67108864", "64MiB" or
// "64M" (K/M/G/T and KiB..TiB are powers of 1024; KB..TB powers of 1000). kFloat: a finite number.
// kString: any non-empty text. kEnum: one of `allowed`.
enum class OptionType { kBool, kInt, kBytes, kFloat, kString, kEnum };

// QUALIFICATION.md: an option is the qualified default, a candidate under test, held back
// (qualified but not promoted), or rejected (failed qualification; a profile may not turn it on).
enum class OptionStatus { kDefault, kCandidate, kHeldBack, kRejected };

// Where a profile may set an option: its top-level `model` / `precision_mode` field, `limits`
// (capacity and memory), `options` (behaviour; a value other than the default is what promotion
// qualifies), `server_args` (deployment), or nowhere (per-rank values and secrets).
enum class ProfileSection { kTopLevel, kLimits, kOptions, kServerArgs, kCommandLineOnly };

const char* to_string(OptionType type);
const char* to_string(OptionStatus status);
const char* to_string(ProfileSection section);

// bool for kBool; int64_t for kInt and kBytes; double for kFloat; std::string for kString and
// kEnum.
using OptionValue = std::variant<bool, int64_t, double, std::string>;

struct ReceiptRef {
  std::string id;      // a bundle id, ^[a-z0-9][a-z0-9._-]*$
  std::string sha256;  // 64 lowercase hex digits: the sha256 of its qualification.json

  static bool is_id(const std::string& id);
  static bool is_sha256(const std::string& hex);
};

struct OptionSpec {
  std::string name;  // the flag without `--`: lowercase words joined by '-'
  OptionType type = OptionType::kBool;
  // The shipped default. A string or enum default may be "" meaning "not set"; an explicit value
  // never may.
  OptionValue default_value = false;
  // The engine's own value before any promotion. When it differs from default_value, `receipt`
  // names the qualification that made the default.
  OptionValue builtin = false;
  std::optional<ReceiptRef> receipt;
  int64_t min_int = 0, max_int = 0;         // kInt, kBytes (inclusive)
  double min_float = 0.0, max_float = 0.0;  // kFloat (inclusive)
  std::vector<std::string> allowed;         // kEnum
  std::string help;
  OptionStatus status = OptionStatus::kDefault;
  ProfileSection section = ProfileSection::kOptions;
  // Options of one group are alternatives (`preset` | `model`): an explicit flag for any of them
  // replaces every profile value of the group, and two explicit ones are an error.
  std::string group;
  bool secret = false;    // redacted from logs and from to_json (api-key)
  bool per_rank = false;  // differs between the ranks of one run, so outside the shared fingerprint
  // Non-empty for an option the engine does not implement yet: why ("no prefix cache exists").
  // Only its built-in value, which describes what the engine does, is accepted: any other value
  // is refused at start (check_implemented) and a profile cannot promote it. Every other option
  // is consumed by the serving configuration (serving_config.h); a test checks that.
  std::string not_implemented;

  // "an integer in [1, 1024]", "one of bf16, fp8_g128", "true or false", ...
  std::string expected() const;
  // A value from flag text, or nullopt when the text is not a valid value.
  std::optional<OptionValue> try_parse(std::string_view text) const;
  // Throws Error(kInvalidArgument, "<where>: expected <expected()>, got \"<text>\"").
  OptionValue parse(std::string_view text, const std::string& where) const;
  // A value from a profile's JSON (typed: a JSON integer for kInt, a boolean for kBool, an integer
  // or a byte-count string for kBytes); throws Error(kInvalidConfig, "<where>: expected ...").
  OptionValue from_json(const nlohmann::json& j, const std::string& where) const;
  // Whether `v` has this option's type and lies in its range or allowed set.
  bool accepts(const OptionValue& v) const;
  nlohmann::json to_json(const OptionValue& v) const;  // secrets are not redacted here
  std::string format(const OptionValue& v) const;      // for log lines; secrets redacted
};

class OptionRegistry {
 public:
  // The table must be consistent (table_problems empty); an inconsistent table is a defect.
  explicit OptionRegistry(std::vector<OptionSpec> specs);

  // Every inconsistency of a table, one sentence each: duplicate or malformed names, a default
  // outside its own range, a default that differs from the built-in without a valid receipt, ...
  static std::vector<std::string> table_problems(const std::vector<OptionSpec>& specs);

  const std::vector<OptionSpec>& specs() const { return specs_; }  // in table order
  const OptionSpec* find(std::string_view name) const;             // nullptr when unknown
  // Throws Error(kInvalidArgument, "unknown option --NAME (did you mean --X?)").
  const OptionSpec& at(std::string_view name) const;
  // The closest known name within a small edit distance, or "".
  std::string suggest(std::string_view name) const;
  // One line per option: flag, type, default, help; for `--help`.
  std::string usage() const;

 private:
  std::vector<OptionSpec> specs_;
};

// The registry of `sparkglm-serve`.
const OptionRegistry& serving_options();

}  // namespace sparkglm
