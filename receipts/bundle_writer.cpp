#include "receipts/bundle_writer.h"

#include <algorithm>

#include "engine/core/error.h"
#include "receipts/bundle_file.h"
#include "receipts/bundle_verifier.h"
#include "receipts/qualification_record.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;
using nlohmann::json;

BundleWriter::BundleWriter(fs::path folder) : folder_(std::move(folder)) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(folder_, ec)) && !fs::is_empty(folder_, ec))
    throw Error(ErrorKind::kInvalidArgument,
                folder_.string() +
                    ": the bundle folder exists and is not empty; a run writes a "
                    "fresh folder");
  fs::create_directories(folder_, ec);
  if (ec || !fs::is_directory(folder_))
    throw Error(ErrorKind::kIo, folder_.string() + ": cannot create the bundle folder: " +
                                    (ec ? ec.message() : "not a folder"));
}

void BundleWriter::claim(const std::string& path, const std::string& kind) {
  SPARKGLM_ASSERT(!finished_, "BundleWriter used after finish()");
  std::string why;
  if (!is_artifact_path(path, &why))
    throw Error(ErrorKind::kInvalidArgument, "artifact path \"" + path + "\": " + why);
  if (path == kManifestName)
    throw Error(ErrorKind::kInvalidArgument,
                "artifact path \"" + path + "\": the manifest is written by finish()");
  const auto& kinds = artifact_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    throw Error(ErrorKind::kInvalidArgument,
                "artifact \"" + path + "\": kind \"" + kind + "\" is not one of the contract's");
  if (!kinds_.emplace(path, kind).second)
    throw Error(ErrorKind::kInvalidArgument, "artifact \"" + path + "\" was added twice");
}

void BundleWriter::add_bytes(const std::string& path, std::string_view bytes,
                             const std::string& kind) {
  claim(path, kind);
  const fs::path where = where_is(path);
  std::error_code ec;
  fs::create_directories(where.parent_path(), ec);
  if (ec)
    throw Error(ErrorKind::kIo, where.parent_path().string() + ": cannot create: " + ec.message());
  write_file_atomically(where, bytes);
}

void BundleWriter::add_file(const std::string& path, const std::string& kind) {
  claim(path, kind);
  std::error_code ec;
  fs::create_directories(where_is(path).parent_path(), ec);
}

fs::path BundleWriter::where_is(const std::string& path) const {
  return folder_ / path;
}

json BundleWriter::finish(json record) {
  SPARKGLM_ASSERT(!finished_, "BundleWriter::finish() called twice");
  if (!record.is_object())
    throw Error(ErrorKind::kInvalidArgument, "qualification record: expected a JSON object");
  json artifacts = json::array();
  for (const auto& [path, kind] : kinds_) {
    const fs::path where = where_is(path);
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(where, ec)))
      throw Error(ErrorKind::kIo, where.string() + ": added as an artifact but not written");
    const FileDigest digest = digest_file(where);
    artifacts.push_back(
        {{"path", path}, {"kind", kind}, {"sha256", digest.sha256}, {"bytes", digest.bytes}});
  }
  record["artifacts"] = std::move(artifacts);
  if (!record.contains("attestation"))
    record["attestation"] = {{"status", "unattested"}, {"by", ""}, {"date", ""}};
  const Problems problems = verify_bundle_record(folder_, record);
  if (!problems.empty()) {
    std::string text = folder_.string() + ": the bundle would not verify:";
    for (const Problem& p : problems) text += "\n  " + p.to_string();
    throw Error(ErrorKind::kInvalidArgument, text);
  }
  write_file_atomically(folder_ / kManifestName, record_file_text(record));
  finished_ = true;
  return record;
}

}  // namespace sparkglm::receipts
