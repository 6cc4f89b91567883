#include "receipts/results_index.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"
#include "receipts/bundle_file.h"
#include "receipts/qualification_record.h"

namespace sparkglm::receipts {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* const kHint = "; run `sparkglm-qualify index` and commit receipts/index.json";

// The entries of results/ in name order, with their types (symbolic links not followed).
std::vector<std::pair<std::string, fs::file_type>> results_entries(const fs::path& receipts) {
  std::vector<std::pair<std::string, fs::file_type>> entries;
  const fs::path results = receipts / kResultsFolder;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(results, ec))) return entries;
  for (const auto& entry : fs::directory_iterator(results, ec))
    entries.emplace_back(entry.path().filename().string(), entry.symlink_status().type());
  if (ec) throw Error(ErrorKind::kIo, results.string() + ": cannot list: " + ec.message());
  std::sort(entries.begin(), entries.end());
  return entries;
}

json index_entry(const fs::path& receipts, const std::string& folder) {
  const std::string path = std::string(kResultsFolder) + "/" + folder;
  const std::string name = path + "/" + kManifestName;
  const std::string bytes = read_file(receipts / name, json_limits::kReceipt.max_bytes);
  const json record = parse_record_text(bytes, name);
  json entry = {{"path", path}, {"qualification_sha256", sha256_hex(bytes)}};
  for (const char* key : {"id", "level", "state", "title", "created_at"}) {
    const auto it = record.is_object() ? record.find(key) : record.end();
    if (!record.is_object() || it == record.end() || !it->is_string())
      throw Error(ErrorKind::kInvalidArgument, name + ": " + key + ": expected a string");
    entry[key] = *it;
  }
  return entry;
}

// " key is X, the index says Y; ..." for each field where the committed entry differs.
std::string differences(const json& now, const json& listed) {
  std::string text;
  json keys = json::object();
  for (const auto& [key, _] : now.items()) keys[key] = true;
  for (const auto& [key, _] : listed.items()) keys[key] = true;
  for (const auto& [key, _] : keys.items()) {
    const json a = now.value(key, json()), b = listed.value(key, json());
    if (a != b)
      text +=
          (text.empty() ? " " : "; ") + key + " is " + a.dump() + ", the index says " + b.dump();
  }
  return text;
}

}  // namespace

json build_index(const fs::path& receipts) {
  json bundles = json::array();
  for (const auto& [folder, type] : results_entries(receipts))
    if (type == fs::file_type::directory) bundles.push_back(index_entry(receipts, folder));
  std::sort(bundles.begin(), bundles.end(), [](const json& a, const json& b) {
    return std::tie(a["id"].get_ref<const std::string&>(),
                    a["path"].get_ref<const std::string&>()) <
           std::tie(b["id"].get_ref<const std::string&>(), b["path"].get_ref<const std::string&>());
  });
  return {{"schema", kIndexSchema}, {"bundles", std::move(bundles)}};
}

std::string index_file_text(const json& index) {
  return index.dump(2) + "\n";
}

json write_index(const fs::path& receipts) {
  std::error_code ec;
  if (!fs::is_directory(receipts, ec))
    throw Error(ErrorKind::kInvalidArgument, receipts.string() + ": not a receipts folder");
  json index = build_index(receipts);
  write_file_atomically(receipts / kIndexName, index_file_text(index));
  return index;
}

Problems stale_index_problems(const fs::path& receipts) {
  json expected;
  try {
    expected = build_index(receipts);
  } catch (const Error& e) {
    return {{kIndexName, "cannot be rebuilt: " + e.message()}};
  }
  const fs::path file = receipts / kIndexName;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(file, ec)))
    return {{kIndexName, std::string("missing") + kHint}};
  std::string committed;
  try {
    committed = read_file(file, json_limits::kReceipt.max_bytes);
  } catch (const Error& e) {
    return {{kIndexName, e.message()}};
  }
  if (committed == index_file_text(expected)) return {};

  json actual;
  try {
    actual = parse_json(committed, "the committed index", ErrorKind::kInvalidArgument,
                        json_limits::kReceipt);
  } catch (const Error& e) {
    return {{kIndexName, e.message() + kHint}};
  }
  // Name each bundle that differs; a difference in anything else is reported as a whole.
  std::map<std::string, json> want, have;
  for (const json& b : expected["bundles"]) want[b["id"].get<std::string>()] = b;
  if (actual.is_object() && actual.contains("bundles") && actual["bundles"].is_array())
    for (const json& b : actual["bundles"])
      if (b.is_object() && b.contains("id") && b["id"].is_string())
        have[b["id"].get<std::string>()] = b;
  Problems problems;
  for (const auto& [id, entry] : want) {
    const auto it = have.find(id);
    if (it == have.end())
      problems.push_back({kIndexName, "stale: bundle " + id + " (" +
                                          entry["path"].get<std::string>() + ") is not listed" +
                                          kHint});
    else if (it->second != entry)
      problems.push_back({kIndexName, "stale: the entry of bundle " + id +
                                          " differs:" + differences(entry, it->second) + kHint});
  }
  for (const auto& [id, entry] : have)
    if (!want.count(id))
      problems.push_back(
          {kIndexName, "stale: lists bundle " + id + ", which is not under results/" + kHint});
  if (problems.empty())
    problems.push_back({kIndexName, std::string("not exactly what `index` writes (order, format "
                                                "or other fields)") +
                                        kHint});
  return problems;
}

Problems verify_all(const fs::path& receipts, const VerifyOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(receipts, ec))
    return {{receipts.string(), "not a folder; expected the receipts folder (receipts/)"}};
  Problems problems;
  for (const auto& [folder, type] : results_entries(receipts)) {
    const std::string prefix = std::string(kResultsFolder) + "/" + folder;
    if (type != fs::file_type::directory) {
      problems.push_back({prefix, type == fs::file_type::symlink
                                      ? "a symbolic link; results/ holds bundle folders only"
                                      : "not a bundle folder; results/ holds bundle folders only"});
      continue;
    }
    for (const Problem& p : verify_bundle(receipts / kResultsFolder / folder, options))
      problems.push_back({prefix + "/" + p.where, p.what});
  }
  for (Problem& p : stale_index_problems(receipts)) problems.push_back(std::move(p));
  // Checked once here rather than per bundle: a private key committed beside the public ones is
  // a leak that must stop CI even when no bundle needs a signature yet.
  for (Problem& p : load_trusted_keys(options.trusted_keys).problems)
    problems.push_back(std::move(p));
  return problems;
}

}  // namespace sparkglm::receipts
