#pragma once
// The keys whose signature makes a record's claim count: one public key per maintainer in
// receipts/keys/, named by the file (receipts/keys/NAME.pem holds an Ed25519 "PUBLIC KEY" PEM;
// NAME.pub the base64 raw key that `keygen` writes). A key is trusted because it is committed to
// the repository, where adding one is a reviewed change; nothing a bundle carries can add one.
#include <filesystem>
#include <map>
#include <string>

#include "receipts/problem.h"

namespace sparkglm::receipts {

inline constexpr const char* kTrustedKeysFolder = "receipts/keys";

struct TrustedKeys {
  std::map<std::string, std::string> names;  // base64 raw public key -> maintainer (file stem)
  Problems problems;  // files of the folder that are not a public key (a private key, say)

  // The maintainer who holds `public_key`, or nullptr when it is not trusted.
  const std::string* holder(const std::string& public_key) const;
};

// Every *.pem and *.pub file in `folder`; other files (a README) are ignored. A missing folder
// trusts nobody, so that every claim above `measurement` fails closed.
TrustedKeys load_trusted_keys(const std::filesystem::path& folder);

}  // namespace sparkglm::receipts
