#include "engine/model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "engine/core/strict_json.h"

namespace sparkglm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorKind::kInvalidCheckpoint, what);
}

// The index may name shards in subdirectories, but never outside the checkpoint directory.
std::string checked_shard_path(const std::string& shard, const std::string& where) {
  const fs::path p(shard);
  if (shard.empty() || !p.has_filename())
    invalid(where + " is '" + shard + "'; expected a file name");
  if (p.has_root_path()) {
    invalid(where + " is '" + shard +
            "', an absolute path; expected a file relative to the checkpoint directory");
  }
  for (const auto& part : p) {
    if (part == "..") {
      invalid(where + " is '" + shard +
              "', which contains '..'; expected a file inside the checkpoint directory");
    }
  }
  return p.lexically_normal().generic_string();
}

// tensor -> shard file, relative to the checkpoint directory.
std::map<std::string, std::string> read_weight_map(const fs::path& index_path) {
  const std::string where = index_path.string();
  const json j =
      parse_json_file(where, ErrorKind::kInvalidCheckpoint, json_limits::kCheckpointIndex);
  if (!j.is_object()) {
    invalid(where + " is a JSON " + j.type_name() + "; expected an object with \"weight_map\"");
  }
  auto meta = j.find("metadata");
  if (meta != j.end() && !meta->is_object()) {
    invalid(where + ": \"metadata\" is a JSON " + meta->type_name() + "; expected an object");
  }
  auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object() || map->empty()) {
    invalid(where + " has no \"weight_map\"; expected a non-empty object {tensor: shard file}");
  }
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : map->items()) {
    const std::string field = where + ": weight_map['" + tensor + "']";
    if (!shard.is_string()) {
      invalid(field + " is a JSON " + shard.type_name() + "; expected a shard file name");
    }
    out[tensor] = checked_shard_path(shard.get<std::string>(), field);
  }
  return out;
}

}  // namespace

std::shared_ptr<Checkpoint> Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw Error(ErrorKind::kIo, "checkpoint directory " + dir + " does not exist");
  }
  const fs::path root(dir);
  const fs::path index_path = root / kIndexName;
  const bool has_index = fs::exists(index_path, ec);
  if (!has_index && !fs::exists(root / kSingleName, ec)) {
    invalid("checkpoint directory " + dir + " has neither " + kIndexName + " nor " + kSingleName);
  }
  std::map<std::string, std::string> weight_map;
  std::set<std::string> shard_set = {kSingleName};
  if (has_index) {
    weight_map = read_weight_map(index_path);
    shard_set.clear();
    for (const auto& [tensor, shard] : weight_map) shard_set.insert(shard);
  }

  std::shared_ptr<Checkpoint> ck(new Checkpoint());
  ck->dir_ = dir;
  for (const auto& shard : shard_set) {
    const fs::path path = root / shard;
    if (!fs::exists(path, ec)) {
      invalid(index_path.string() + " names shard " + shard + ", which is not in " + dir);
    }
    ck->shard_names_.push_back(shard);
    ck->shards_.emplace_back(path.string());
  }

  // Where each tensor really is, by the shards' own headers.
  for (size_t s = 0; s < ck->shards_.size(); ++s) {
    for (const auto& entry : ck->shards_[s].header().entries) {
      auto [it, inserted] = ck->tensors_.emplace(entry.name, s);
      if (!inserted) {
        invalid("tensor '" + entry.name + "' is in two shards: " + ck->shard_names_[it->second] +
                " and " + ck->shard_names_[s]);
      }
    }
  }
  if (!has_index) return ck;
  for (const auto& [tensor, shard] : weight_map) {
    auto it = ck->tensors_.find(tensor);
    if (it == ck->tensors_.end() || ck->shard_names_[it->second] != shard) {
      invalid(std::string(kIndexName) + " lists tensor '" + tensor + "' in shard " + shard +
              ", which does not hold it" +
              (it == ck->tensors_.end() ? "" : " (it is in " + ck->shard_names_[it->second] + ")"));
    }
  }
  for (const auto& [tensor, s] : ck->tensors_) {
    if (!weight_map.count(tensor)) {
      invalid("shard " + ck->shard_names_[s] + " holds tensor '" + tensor + "', which " +
              kIndexName + " does not list");
    }
  }
  return ck;
}

std::optional<TensorView> Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return std::nullopt;
  return shards_[it->second].find(name);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, _] : tensors_) out.push_back(name);
  return out;
}

std::string Checkpoint::identity() const {
  std::call_once(identity_once_, [this] {
    std::string out = "sha256:";
    for (size_t i = 0; i < shards_.size(); ++i) {
      out +=
          (i ? "," : "") + shard_names_[i] + "=" + sha256_hex(shards_[i].data(), shards_[i].size());
    }
    identity_ = std::move(out);
  });
  return identity_;
}

std::vector<std::string> Checkpoint::shard_files() const {
  return shard_names_;
}

}  // namespace sparkglm
