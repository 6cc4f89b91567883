#pragma once
// What makes an attestation more than a word: an Ed25519 signature (OpenSSL) over the record's
// canonical bytes, which cover every field, and through `artifacts` every file, except the
// signature itself.
#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "receipts/bundle_verifier.h"
#include "receipts/problem.h"

namespace sparkglm::receipts {

// `record` without attestation.signature, serialised by nlohmann's dump() (keys sorted, no
// whitespace, UTF-8): the bytes a signature covers.
std::string canonical_bytes(const nlohmann::json& record);

// Generates an Ed25519 key pair: writes the private key as PEM to `private_pem` (mode 0600,
// refusing an existing file) and returns the raw public key in base64.
std::string generate_key(const std::filesystem::path& private_pem);

// A --pubkey argument: a PEM public key file, a file holding the base64 raw key, or the base64
// text itself. Returns the base64 raw key; throws Error naming the argument otherwise.
std::string read_public_key(const std::string& argument);

// The signature object {algorithm, public_key, value} over canonical_bytes(record) with the
// private key in `private_pem`.
nlohmann::json sign_record(const nlohmann::json& record, const std::filesystem::path& private_pem);

// Whether `signature` (base64, 64 bytes) is by `public_key` (base64, 32 bytes) over `message`.
bool signature_verifies(const std::string& public_key, std::string_view message,
                        const std::string& signature);

// `sign BUNDLE`: marks the record maintainer-reviewed by `by` now, sets its state to `state` (when
// not empty: signing is the only way a record rises above `measurement`), signs it, checks that
// the bundle as it would then stand verifies under `options` (so the key must be trusted and the
// verdicts must re-derive), and only then replaces qualification.json atomically. Returns the
// problems that stopped it (nothing is written then); empty when it signed.
Problems sign_bundle(const std::filesystem::path& bundle, const std::filesystem::path& private_pem,
                     const std::string& by, const VerifyOptions& options,
                     const std::string& state = "");

// Base64 (RFC 4648, padded). decode returns false on anything that is not canonical base64.
std::string base64_encode(std::string_view bytes);
bool base64_decode(const std::string& text, std::string* bytes);

}  // namespace sparkglm::receipts
