#pragma once
// The configuration a `sparkglm-serve` process runs with: every registry option resolved as
// built-in default < profile value < explicit command-line flag, with a log line for each flag that
// overrides a profile value, and a canonical JSON form whose sha256 joins the run identity and the
// fingerprint the ranks compare at start.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/options/option_registry.h"
#include "engine/options/profile.h"

namespace sparkglm {

enum class ValueSource { kBuiltin, kProfile, kCommandLine };
const char* to_string(ValueSource source);

// Flags as given: `--name value`, `--name=value`, `--flag` / `--no-flag` for bools, and
// `--profile NAME|FILE`. Unknown options, repeated ones, missing values and positional arguments
// are Error(kInvalidArgument) naming them; bad values name the expected type and range.
struct CommandLine {
  struct Value {
    std::string name;  // registry name
    OptionValue value;
  };
  std::string profile;        // "" when no --profile
  std::vector<Value> values;  // in the order given
};
CommandLine parse_command_line(const std::vector<std::string>& args,
                               const OptionRegistry& registry = serving_options());

class EffectiveConfig {
 public:
  // `profile` may be null; `registry` must outlive the config. Throws Error(kInvalidArgument) when
  // two flags of one group are given.
  static EffectiveConfig resolve(const OptionRegistry& registry, const Profile* profile,
                                 const CommandLine& command_line);

  // Typed reads by registry name. Asking for an unknown name or the wrong type is a defect in the
  // caller (an assert), not a user error. Each read is recorded (reads()).
  bool boolean(std::string_view name) const;            // kBool
  int64_t integer(std::string_view name) const;         // kInt, kBytes (bytes as a count)
  double number(std::string_view name) const;           // kFloat
  const std::string& str(std::string_view name) const;  // kString, kEnum; "" = not set
  const OptionValue& value(std::string_view name) const;
  // The value without counting it as a read: for checks and log lines that consume nothing.
  const OptionValue& peek(std::string_view name) const { return entry(name).value; }
  ValueSource source(std::string_view name) const;
  // Every name read through boolean/integer/number/str/value so far: what the code consumed. The
  // registry test fills the serving configuration from a fresh config and checks that every
  // option is in here or refused as not implemented (serving_config.h). to_json, summary and
  // source() do not count as reads.
  const std::set<std::string, std::less<>>& reads() const { return reads_; }

  // "--max-num-seqs=2 overrides profile 4x1m value 4", one per overriding flag, in flag order.
  const std::vector<std::string>& log_lines() const { return log_lines_; }
  // The profile's name, file and byte sha256; all "" without a profile.
  const std::string& profile_name() const { return profile_name_; }
  const std::string& profile_path() const { return profile_path_; }
  const std::string& profile_sha256() const { return profile_sha256_; }

  // {"name": value, ...} over every option, keys sorted, secrets "<redacted>" when set, per-rank
  // options (rank) left out so that every rank of one run has the same JSON.
  nlohmann::json to_json() const;
  std::string canonical_json() const { return to_json().dump(); }  // compact, sorted
  std::string sha256() const;                                      // of canonical_json()
  // "profile 4x1m (sha256 ...), config sha256 ..." for the startup log.
  std::string summary() const;

  const OptionRegistry& registry() const { return *registry_; }

 private:
  struct Entry {
    OptionValue value;
    ValueSource source = ValueSource::kBuiltin;
  };
  const Entry& entry(std::string_view name) const;

  const OptionRegistry* registry_ = nullptr;
  std::map<std::string, Entry, std::less<>> entries_;
  mutable std::set<std::string, std::less<>> reads_;  // read at start, on one thread
  std::vector<std::string> log_lines_;
  std::string profile_name_, profile_path_, profile_sha256_;
};

// What `sparkglm-serve`'s main calls with its arguments (without argv[0]): parses the flags, loads
// `--profile` from `profile_dir` (default_profile_dir() when ""), resolves, and checks the settings
// that depend on each other (one model source; rank below the ranks; world-size 1 or tp-size;
// num-layers only with a preset, a multiple of 4). Handle --help and --version before calling.
EffectiveConfig parse_serve_args(const std::vector<std::string>& args,
                                 const std::string& profile_dir = "");
EffectiveConfig parse_serve_args(int argc, const char* const* argv,
                                 const std::string& profile_dir = "");

}  // namespace sparkglm
