#pragma once
// What a run uses to write its bundle: a fresh folder, the artifacts as they are produced, then
// qualification.json with every artifact's sha256, written only if the whole bundle would verify.
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sparkglm::receipts {

class BundleWriter {
 public:
  // Creates `folder` (and its parents); refuses one that exists and is not empty, so that a run
  // never mixes its files with another's.
  explicit BundleWriter(std::filesystem::path folder);

  const std::filesystem::path& folder() const { return folder_; }

  // Writes `bytes` at the relative `path` (creating its subfolders) and lists it as `kind`.
  void add_bytes(const std::string& path, std::string_view bytes, const std::string& kind);

  // Lists a file that is, or will be by finish(), at the relative `path` (a server log streamed
  // there, say); where_is() gives its location. It is hashed at finish().
  void add_file(const std::string& path, const std::string& kind);
  std::filesystem::path where_is(const std::string& path) const;

  // Fills record["artifacts"] (path, kind, sha256, bytes; sorted by path) and, when absent,
  // record["attestation"] (unattested); checks the bundle as it would stand against every rule of
  // `verify`; then writes qualification.json atomically. Throws Error listing every problem, and
  // writes nothing, when it would not verify. Returns the record written.
  nlohmann::json finish(nlohmann::json record);

 private:
  // Refuses a path that is not a bundle path, is qualification.json, or was added already.
  void claim(const std::string& path, const std::string& kind);

  std::filesystem::path folder_;
  std::map<std::string, std::string> kinds_;  // path -> kind, in path order
  bool finished_ = false;
};

}  // namespace sparkglm::receipts
