#pragma once
// A checkpoint directory: `model.safetensors.index.json` and the shards it names, or a single
// `model.safetensors`. Every shard is mapped once; tensors are views into those mappings.
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/safetensors.h"
#include "engine/model/tensor_source.h"

namespace sparkglm {

class Checkpoint : public TensorSource {
 public:
  // Error(kIo) when `dir` is not a readable directory; Error(kInvalidCheckpoint) for an index that
  // is not JSON or lacks weight_map, a shard path that is absolute or contains "..", a shard that
  // is missing, and any disagreement between the index and the shards' own headers.
  static std::shared_ptr<Checkpoint> open(const std::string& dir);

  std::optional<TensorView> find(const std::string& name) const override;
  std::vector<std::string> names() const override;  // sorted
  // "sha256:<shard>=<hex>,<shard>=<hex>" over the shards in name order. Hashing reads every byte,
  // so it happens on the first call only; later and concurrent calls share the result.
  std::string identity() const override;

  const std::string& dir() const { return dir_; }
  std::vector<std::string> shard_files() const;  // relative to dir(), sorted

 private:
  Checkpoint() = default;

  std::string dir_;
  std::vector<std::string> shard_names_;  // sorted, parallel to shards_
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> tensors_;  // tensor name -> index into shards_
  mutable std::once_flag identity_once_;
  mutable std::string identity_;
};

}  // namespace sparkglm
