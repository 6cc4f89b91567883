// describe(): the account `sparkglm recipe apply` prints of what it did with every flag and key.
#include "operator/recipe_translation.h"

namespace sparkglm::operator_tool {

namespace {

void section(std::string& out, const std::string& title, const std::vector<std::string>& lines,
             size_t max_lines = SIZE_MAX) {
  if (lines.empty()) return;
  out += title + " (" + std::to_string(lines.size()) + "):\n";
  for (size_t i = 0; i < lines.size() && i < max_lines; ++i) out += "  " + lines[i] + "\n";
  if (lines.size() > max_lines)
    out += "  ... and " + std::to_string(lines.size() - max_lines) +
           " more (all listed in the profile's provenance)\n";
}

}  // namespace

std::string describe(const ProfileDraft& draft) {
  const auto& p = draft.profile["provenance"];
  std::string out = "recipe " + p["source"].get<std::string>() + "\n  sha256 " +
                    p["sha256"].get<std::string>() + ", fetched " +
                    p["fetched_at"].get<std::string>() + "\n";
  out += "profile " + draft.name + ": model " + draft.profile["model"].get<std::string>() +
         ", precision_mode " + draft.profile["precision_mode"].get<std::string>() + "\n";
  section(out, "applied", draft.applied);
  section(out, "inferred or noted", draft.inferred);
  section(out, "not supported, not in the profile", draft.unsupported);
  section(out, "environment refused", draft.refused_env);
  std::string kept;
  for (const std::string& key : draft.env_notes) kept += (kept.empty() ? "" : ", ") + key;
  if (!kept.empty())
    out += "environment kept as notes, not applied (" + std::to_string(draft.env_notes.size()) +
           "): " + kept + "\n";
  section(out, "environment text skipped", draft.env_skipped, 12);
  return out;
}

}  // namespace sparkglm::operator_tool
