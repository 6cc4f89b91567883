#include "receipts/bundle_verifier.h"

#include <iterator>
#include <map>
#include <set>

#include "engine/core/error.h"
#include "engine/core/strict_json.h"
#include "receipts/attestation.h"
#include "receipts/bundle_file.h"
#include "receipts/qualification_record.h"
#include "receipts/record_consistency.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kManifest = std::string(kManifestName) + ": ";

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

// What is at `path` without following a symbolic link, as a problem ("" when a regular file).
std::string not_regular(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path, ec);
  if (ec || status.type() == fs::file_type::not_found) return "missing";
  if (status.type() == fs::file_type::symlink)
    return "a symbolic link (not followed; a bundle holds regular files only)";
  if (status.type() != fs::file_type::regular) return "not a regular file";
  return "";
}

// The folder of `path` (relative, already checked by is_artifact_path) that is a symbolic link, or
// "": a file reached through a linked folder lies outside the bundle, and is neither hashed nor
// read.
std::string linked_folder(const fs::path& bundle, const std::string& path) {
  fs::path folder = bundle;
  const fs::path rel(path);
  for (auto it = rel.begin(); std::next(it) != rel.end(); ++it) {
    folder /= *it;
    std::error_code ec;
    if (fs::symlink_status(folder, ec).type() == fs::file_type::symlink)
      return folder.lexically_relative(bundle).generic_string();
  }
  return "";
}

// The listed artifacts: each present, unchanged and listed once. Returns the set of paths listed;
// `intact` gains those present and unchanged.
std::set<std::string> check_artifacts(const fs::path& bundle, const json& record,
                                      Problems& problems, std::set<std::string>& intact) {
  std::set<std::string> listed;
  const auto artifacts = record.find("artifacts");
  if (artifacts == record.end() || !artifacts->is_array()) return listed;
  std::map<std::string, size_t> first_at;
  for (size_t i = 0; i < artifacts->size(); ++i) {
    const json& a = (*artifacts)[i];
    const std::string at = "artifacts[" + std::to_string(i) + "]";
    // A malformed entry is already a record problem; its path is never touched.
    if (!a.is_object() || !a.contains("path") || !a["path"].is_string()) continue;
    const std::string path = a["path"].get<std::string>();
    if (!is_artifact_path(path, nullptr) || path == kManifestName) continue;
    if (const auto [it, fresh] = first_at.emplace(path, i); !fresh) {
      problems.push_back(
          {kManifest + at + ".path",
           quoted(path) + " is listed twice (also artifacts[" + std::to_string(it->second) + "])"});
      continue;
    }
    listed.insert(path);
    if (const std::string link = linked_folder(bundle, path); !link.empty()) {
      problems.push_back(
          {path, "inside " + link + ", a symbolic link (not followed), but listed in " + at});
      continue;
    }
    if (const std::string why = not_regular(bundle / path); !why.empty()) {
      problems.push_back({path, why + ", but listed in " + at});
      continue;
    }
    const FileDigest digest = digest_file(bundle / path);
    const auto sha = a.find("sha256");
    const size_t before = problems.size();
    if (sha != a.end() && sha->is_string() && is_sha256_hex(*sha) && *sha != digest.sha256)
      problems.push_back({path, "changed: its sha256 is " + digest.sha256 + ", " + at +
                                    ".sha256 says " + sha->get<std::string>()});
    const auto bytes = a.find("bytes");
    if (bytes != a.end() && bytes->is_number_integer() && *bytes != digest.bytes)
      problems.push_back({path, "changed: it holds " + std::to_string(digest.bytes) + " bytes, " +
                                    at + ".bytes says " + bytes->dump()});
    if (problems.size() == before && sha != a.end() && *sha == digest.sha256) intact.insert(path);
  }
  return listed;
}

// Every file in the folder is listed (or is qualification.json); nothing is a symbolic link.
void check_folder(const fs::path& bundle, const std::set<std::string>& listed, Problems& problems) {
  std::error_code ec;
  fs::recursive_directory_iterator it(bundle, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(bundle).generic_string();
    const fs::file_type type = it->symlink_status(ec).type();
    if (ec) break;
    if (type == fs::file_type::directory) continue;
    if (type == fs::file_type::symlink)
      problems.push_back(
          {rel, "a symbolic link (not followed; a bundle holds regular files only)"});
    else if (type != fs::file_type::regular)
      problems.push_back({rel, "not a regular file"});
    else if (rel != kManifestName && !listed.count(rel))
      problems.push_back({rel, "not listed in artifacts"});
  }
  if (ec) problems.push_back({bundle.string(), "cannot list the folder: " + ec.message()});
}

std::string text_of(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

// Attestation: an attested record's lower gates passed; accepted and promoted are attested.
void check_attestation(const json& record, Problems& problems) {
  const auto attestation = record.find("attestation");
  if (attestation == record.end() || !attestation->is_object()) return;
  const std::string status = text_of(*attestation, "status");
  const std::string state = text_of(record, "state");
  if ((state == "accepted" || state == "promoted") && status != "maintainer-reviewed")
    problems.push_back({kManifest + "attestation.status",
                        "state is " + quoted(state) +
                            ", which needs status \"maintainer-reviewed\"; got " + quoted(status)});
  const int level = level_number(text_of(record, "level"));
  const auto gates = record.find("gates");
  if (status != "maintainer-reviewed" || level < 0 || gates == record.end() || !gates->is_array())
    return;
  for (size_t i = 0; i < gates->size(); ++i) {
    const json& gate = (*gates)[i];
    if (!gate.is_object()) continue;
    const std::string id = text_of(gate, "id"), gate_status = text_of(gate, "status");
    const int gate_level = level_number(id);
    if (gate_level < 0 || gate_level >= level) continue;
    if (gate_status != "pass" && gate_status != "not-applicable")
      problems.push_back({kManifest + "gates[" + std::to_string(i) + "].status",
                          "the record is attested at level " + text_of(record, "level") +
                              " but lower gate " + id + " is " + quoted(gate_status) +
                              " (expected pass or not-applicable)"});
  }
}

// A claim is signed by a trusted key; a signature present verifies, and is by --pubkey when one is
// given.
void check_signature(const json& record, const VerifyOptions& options, Problems& problems) {
  const auto attestation = record.find("attestation");
  const json* signature = nullptr;
  if (attestation != record.end() && attestation->is_object() && attestation->contains("signature"))
    signature = &(*attestation)["signature"];
  const std::string where = kManifest + "attestation.signature";
  const bool claim = record_makes_claim(record);
  if (!signature) {
    if (claim)
      problems.push_back(
          {where, "missing: state " + quoted(text_of(record, "state")) + " (attestation " +
                      quoted(attestation != record.end() ? text_of(*attestation, "status") : "") +
                      ") claims more than a measurement, so a trusted key (" +
                      options.trusted_keys.string() +
                      "/) signs it (`sparkglm-qualify sign BUNDLE --key KEY.pem --state STATE`)"});
    if (!options.public_key.empty())
      problems.push_back({where, "missing, but --pubkey was given: the record is not signed"});
    return;
  }
  if (!signature->is_object()) return;  // a record problem already
  const std::string key = text_of(*signature, "public_key");
  if (!options.public_key.empty() && key != options.public_key) {
    problems.push_back({where + ".public_key", "signed by another key: " + quoted(key) +
                                                   ", --pubkey is " + quoted(options.public_key)});
    return;
  }
  if (!signature_verifies(key, canonical_bytes(record), text_of(*signature, "value"))) {
    problems.push_back(
        {where + ".value", "does not verify against public_key " + quoted(key) +
                               " over the record's canonical bytes: the record changed after "
                               "signing, or the signature is not by that key"});
    return;
  }
  // Anyone can make a key; only one committed to the trusted folder makes a signature count.
  const TrustedKeys trusted = load_trusted_keys(options.trusted_keys);
  if (!trusted.holder(key))
    problems.push_back(
        {where + ".public_key", quoted(key) + " is not a trusted key: none of " +
                                    options.trusted_keys.string() + "/ (" +
                                    std::to_string(trusted.names.size()) +
                                    " key(s)) holds it, so the signature proves nothing"});
}

}  // namespace

bool record_makes_claim(const json& record) {
  const auto attestation = record.find("attestation");
  return text_of(record, "state") != "measurement" ||
         (attestation != record.end() && attestation->is_object() &&
          text_of(*attestation, "status") != "unattested");
}

Problems verify_bundle_record(const fs::path& given, const json& record,
                              const VerifyOptions& options) {
  // One spelling of the folder ("b", "b/", "b/."), so that walked paths come out relative.
  fs::path bundle = fs::absolute(given).lexically_normal();
  if (bundle.filename().empty()) bundle = bundle.parent_path();
  Problems problems;
  for (const Problem& p : check_record(record)) problems.push_back({kManifest + p.where, p.what});
  if (!record.is_object()) return problems;
  const std::string id = text_of(record, "id"), folder = bundle.filename().string();
  if (record.contains("id") && record["id"].is_string() && id != folder)
    problems.push_back(
        {kManifest + "id", quoted(id) + " does not match the folder name " + quoted(folder)});
  std::set<std::string> intact;
  check_folder(bundle, check_artifacts(bundle, record, problems, intact), problems);
  check_attestation(record, problems);
  check_signature(record, options, problems);
  const bool well_formed = problems.empty();
  for (Problem& p : check_consistency(bundle, record, intact)) problems.push_back(std::move(p));
  // Re-derivation reads the raw records as the record describes them; on a malformed record or a
  // changed artifact it would only repeat what is reported above.
  if (options.verdicts && well_formed)
    for (Problem& p : options.verdicts(bundle, record, options)) problems.push_back(std::move(p));
  return problems;
}

Problems verify_bundle(const fs::path& bundle, const VerifyOptions& options) {
  std::error_code ec;
  const fs::file_type type = fs::symlink_status(bundle, ec).type();
  if (type == fs::file_type::symlink)
    return {{bundle.string(), "a symbolic link; give the bundle folder itself"}};
  if (type != fs::file_type::directory) return {{bundle.string(), "not a folder"}};
  const fs::path manifest = bundle / kManifestName;
  if (const std::string why = not_regular(manifest); !why.empty()) return {{kManifestName, why}};
  json record;
  try {
    record = parse_record_text(read_file(manifest, json_limits::kReceipt.max_bytes), kManifestName);
  } catch (const Error& e) {
    // The message starts with the file's name, which `where` already says.
    const std::string prefix = std::string(kManifestName) + ": ";
    const std::string& m = e.message();
    return {{kManifestName, "malformed: " + (m.starts_with(prefix) ? m.substr(prefix.size()) : m)}};
  }
  return verify_bundle_record(bundle, record, options);
}

}  // namespace sparkglm::receipts
