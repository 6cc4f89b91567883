#pragma once
// `verify BUNDLE`: every rule of docs/qualification-bundle.md ("Verification rules"). A bundle that
// does not verify counts for nothing, so the verifier reports everything it finds, each problem
// naming the file or the field of qualification.json.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "receipts/problem.h"

namespace sparkglm::receipts {

struct VerifyOptions {
  // --pubkey: the base64 raw Ed25519 key the record must be signed by; empty when not given.
  std::string public_key;
};

// Everything wrong with the bundle in the folder `bundle`; empty when it verifies.
Problems verify_bundle(const std::filesystem::path& bundle, const VerifyOptions& options = {});

// The same rules for `record` as if it were the bundle's qualification.json: what the writer and
// `sign` check before they write one.
Problems verify_bundle_record(const std::filesystem::path& bundle, const nlohmann::json& record,
                              const VerifyOptions& options = {});

}  // namespace sparkglm::receipts
