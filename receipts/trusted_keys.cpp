#include "receipts/trusted_keys.h"

#include <algorithm>
#include <system_error>
#include <vector>

#include "engine/core/error.h"
#include "receipts/attestation.h"
#include "receipts/bundle_file.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;

const std::string* TrustedKeys::holder(const std::string& public_key) const {
  const auto it = names.find(public_key);
  return it == names.end() ? nullptr : &it->second;
}

TrustedKeys load_trusted_keys(const fs::path& folder) {
  TrustedKeys keys;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return keys;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(folder, ec))
    if (entry.path().extension() == ".pem" || entry.path().extension() == ".pub")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    const std::string where = file.string();
    if (!fs::is_regular_file(fs::symlink_status(file, ec))) {
      keys.problems.push_back({where, "not a regular file (a trusted key is never a link)"});
      continue;
    }
    // A private key here would publish the ability to sign; refuse it loudly rather than use it.
    if (read_file(file).find("PRIVATE KEY") != std::string::npos) {
      keys.problems.push_back(
          {where,
           "holds a PRIVATE key: remove it from the repository at once, commit only the "
           "public key (NAME.pub from `keygen`)"});
      continue;
    }
    try {
      const std::string key = read_public_key(file.string());
      const std::string name = file.stem().string();
      if (const auto [it, fresh] = keys.names.emplace(key, name); !fresh)
        keys.problems.push_back({where, "the same key as " + it->second});
    } catch (const Error& e) {
      keys.problems.push_back({where, e.message()});
    }
  }
  if (ec) keys.problems.push_back({folder.string(), "cannot list: " + ec.message()});
  return keys;
}

}  // namespace sparkglm::receipts
