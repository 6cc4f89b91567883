#pragma once
// QUALIFICATION.md, "Promotion": a profile option changes from the engine's default only through a
// receipt that verifies, whose candidate ran with exactly that option and value, whose level meets
// the option's change class and whose gates and protected metrics all passed. `promote` writes the
// option and the receipt's id and sha256 into the profile; G0 re-checks every promotion of every
// profile against the committed bundle, so moving a folder or editing a profile by hand promotes
// nothing.
#include <filesystem>
#include <string>

#include "engine/options/option_registry.h"
#include "gates/change_class_policy.h"
#include "receipts/bundle_verifier.h"
#include "receipts/problem.h"

namespace sparkglm::gates {

// Everything that stops the bundle in `bundle` from backing `option` = `value`; empty when it
// does. The bundle verifies under `verification` (full_verification(): a trusted signature, and
// every gate verdict re-derived from its raw records, so a hand-written pass promotes nothing);
// `expected_sha256` (when not empty) must equal the sha256 of its qualification.json.
receipts::Problems receipt_backs_option(const std::filesystem::path& bundle,
                                        const OptionSpec& option, const OptionValue& value,
                                        const ChangeClassPolicy& policy,
                                        const receipts::VerifyOptions& verification,
                                        const std::string& expected_sha256 = "");

struct PromoteRequest {
  std::string profile;  // a name in profile_dir, or a path
  std::string profile_dir;
  std::string option;                  // registry name
  std::string value;                   // as on the command line
  std::filesystem::path receipt;       // the bundle folder; must sit in <receipts>/results/
  std::filesystem::path receipts;      // the receipts folder (default "receipts")
  std::filesystem::path gates;         // the gates folder (default "gates")
  std::filesystem::path trusted_keys;  // default <receipts>/keys
};

// Checks, then rewrites the profile atomically (options.<option> and promotions.<option>).
// Throws Error listing every problem; writes nothing then.
void promote(const PromoteRequest& request);

}  // namespace sparkglm::gates
