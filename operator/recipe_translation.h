#pragma once
// Turns a Recipe into a SparkGLM profile: every serve flag that names one of our options sets it;
// every other flag is listed with the reason it is not applied; environment keys that name an
// engine option (SPARKGLM_MAX_NUM_SEQS) become options, keys that could change what code runs
// (LD_PRELOAD, PATH, ...) are refused, and the rest are kept as inert notes. The profile records
// where it came from (`provenance`) and is validated against the option registry before anyone
// writes it.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/recipe.h"
#include "operator/recipe_fetch.h"

namespace sparkglm::operator_tool {

struct TranslationOptions {
  std::string name;       // the profile name; "" = derived from the recipe's id or title
  std::string model_dir;  // a local checkpoint to name instead of the recipe's model
};

struct ProfileDraft {
  std::string name;
  nlohmann::ordered_json profile;        // in the shipped profiles' field order
  std::string text;                      // the file's bytes: profile.dump(2) + "\n"
  std::vector<std::string> applied;      // "--max-num-seqs=4 -> limits.max_num_seqs = 4"
  std::vector<std::string> unsupported;  // "--ep-size=2: <reason>"
  std::vector<std::string> refused_env;  // "LD_PRELOAD: <reason>"
  std::vector<std::string> env_notes;    // keys kept as notes, not applied
  std::vector<std::string> env_skipped;  // what the environment text held but no value was read
  std::vector<std::string> inferred;     // values the recipe did not state as a flag
};

// A profile name from free text: lower case, runs of other characters become '-'; "" when nothing
// is left.
std::string profile_name_from(const std::string& text);
// Whether an environment key could change what code the engine runs, and why ("" when not).
std::string refused_env_reason(const std::string& key);

// `profile_path` (PROFILE_DIR/NAME.json) is where the profile would be written; the draft is parsed
// as that file (Profile::parse), so a result the registry rejects throws Error(kInvalidConfig) and
// nothing can be written. A recipe flag with a value our option does not accept is an error too.
ProfileDraft translate_recipe(const Recipe& recipe, const FetchedRecipe& fetched,
                              const TranslationOptions& options, const std::string& profile_dir);

// The human-readable account of a draft: what was applied, inferred, not supported, refused, kept.
std::string describe(const ProfileDraft& draft);

}  // namespace sparkglm::operator_tool
