#pragma once
// A launch profile, `profiles/NAME.json`: the model, precision mode, limits, behaviour options and
// server arguments one deployment runs with, every value validated against the option registry.
//
//   {
//     "name": "4x1m",                      // equals the file name without .json
//     "description": "...",
//     "model": "glm-5.3-flash",            // a preset, or a checkpoint path containing '/'
//     "precision_mode": "strict",
//     "limits": {"max_num_seqs": 4, "max_seq_len": 1048576, "max_prefill_tokens": 8192, ...},
//     "options": {"kv-cache-dtype": "fp8_g128", ...},
//     "server_args": {"world-size": 2, ...},
//     "promotions": {"kv-cache-dtype": {"value": "fp8_g128", "receipt_id": "...",
//                                       "receipt_sha256": "<64 hex>"}},
//     "provenance": {"source": "https://...", "sha256": "<64 hex>", "fetched_at": "...", ...}
//   }
//
// Keys are option names; '_' may stand for '-'. Each option belongs to one section (its
// ProfileSection). A relative model path is relative to the profile's directory.
//
// The profile's identity is the sha256 of its file bytes, not of a canonical re-serialization: it
// is what `sha256sum profiles/4x1m.json` prints, it needs no agreement on a canonical form between
// tools, and any edit to the shipped file, whitespace included, shows up in the run identity.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/options/option_registry.h"

namespace sparkglm {

struct PromotionRecord {
  OptionValue value;   // the value the receipt qualified; equals the profile's `options` value
  ReceiptRef receipt;  // the qualification bundle's id and sha256
};

class Profile {
 public:
  // `name_or_path` is a path when it contains '/' or ends in ".json", else a name looked up as
  // `<profile_dir>/<name>.json`. Errors: kInvalidArgument for an unknown name (listing the
  // available ones), kIo for an unreadable file, kInvalidConfig naming the file and the field.
  static Profile load(const std::string& name_or_path, const std::string& profile_dir,
                      const OptionRegistry& registry = serving_options());
  // `path` names the file in messages and gives the expected name and the model path's base.
  static Profile parse(std::string_view bytes, const std::string& path,
                       const OptionRegistry& registry = serving_options());

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::string& path() const { return path_; }
  const std::string& sha256() const { return sha256_; }  // of the file's bytes
  // Every option the profile sets, by registry name (`model` sets `preset` or `model`).
  const std::map<std::string, OptionValue>& values() const { return values_; }
  // The field that set `option`, as written ("limits.max_num_seqs"), or "" when it sets none.
  std::string field_of(const std::string& option) const;
  const std::map<std::string, PromotionRecord>& promotions() const { return promotions_; }
  // `options` values that differ from the registry default with no promotion record: what G0
  // reports as a default not backed by a receipt.
  const std::vector<std::string>& unbacked_options() const { return unbacked_; }
  // The optional `provenance` object of an imported profile (null when absent): inert notes.
  const nlohmann::json& provenance() const { return provenance_; }

 private:
  std::string name_, description_, path_, sha256_;
  std::map<std::string, OptionValue> values_;
  std::map<std::string, std::string> fields_;
  std::map<std::string, PromotionRecord> promotions_;
  std::vector<std::string> unbacked_;
  nlohmann::json provenance_;
};

bool is_profile_path(const std::string& name_or_path);
// The profile names in `profile_dir` (every NAME.json), sorted.
std::vector<std::string> profile_names(const std::string& profile_dir);
// The repository's profiles/: the first `profiles` directory beside the running executable or one
// of its parent directories, else the one beside this source tree, else "profiles".
std::string default_profile_dir();

}  // namespace sparkglm
