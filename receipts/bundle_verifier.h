#pragma once
// `verify BUNDLE`: every rule of docs/qualification-bundle.md ("Verification rules"). A bundle that
// does not verify counts for nothing, so the verifier reports everything it finds, each problem
// naming the file or the field of qualification.json. The layers, and what each proves (the
// threat model is in the doc): the record's structure; the artifacts' sha256 (nothing changed by
// accident); the record's consistency with its own numbers and artifacts (record_consistency.h);
// a trusted signature for any claim above `measurement`; and, with a VerdictCheck, every gate
// verdict and metric re-derived from the raw records.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "receipts/problem.h"
#include "receipts/trusted_keys.h"

namespace sparkglm::receipts {

struct VerifyOptions;

// Re-derives the record's gate verdicts and metrics from the bundle's raw records under the gate
// definitions in options.gates. It lives in the gates layer (gates/verdict_rederivation.h), above
// this one, so the commands hand it in; without it a verdict is checked for consistency only.
using VerdictCheck = Problems (*)(const std::filesystem::path& bundle, const nlohmann::json& record,
                                  const VerifyOptions& options);

struct VerifyOptions {
  // --pubkey: the base64 raw Ed25519 key the record must be signed by; empty when not given.
  std::string public_key;
  // --keys: the trusted public keys; a record above `measurement`, or attested, is signed by one.
  std::filesystem::path trusted_keys = kTrustedKeysFolder;
  // --gates: the gate definitions `verdicts` re-derives with.
  std::filesystem::path gates = "gates";
  VerdictCheck verdicts = nullptr;
};

// Whether `record` claims more than "these numbers were observed": a state other than
// `measurement`, or an attestation. Such a record counts only when a trusted key signed it.
bool record_makes_claim(const nlohmann::json& record);

// Everything wrong with the bundle in the folder `bundle`; empty when it verifies.
Problems verify_bundle(const std::filesystem::path& bundle, const VerifyOptions& options = {});

// The same rules for `record` as if it were the bundle's qualification.json: what the writer and
// `sign` check before they write one.
Problems verify_bundle_record(const std::filesystem::path& bundle, const nlohmann::json& record,
                              const VerifyOptions& options = {});

}  // namespace sparkglm::receipts
