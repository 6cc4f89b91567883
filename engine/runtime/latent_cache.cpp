#include "engine/runtime/latent_cache.h"

#include "engine/core/error.h"

namespace sparkglm {

LatentCache::LatentCache(const ModelConfig& config, int num_blocks, int block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      num_layers_(config.num_mla_layers() + (config.mtp_layer() >= 0 ? 1 : 0)),
      latent_dim_(config.kv_lora_rank),
      index_dim_(config.index_head_dim) {
  if (num_blocks <= 0 || block_size <= 0)
    throw Error(ErrorKind::kInvalidArgument, "latent cache: expected positive block count and size");
  const size_t rows = size_t(num_layers_) * size_t(num_blocks) * size_t(block_size);
  latent_.assign(rows * size_t(latent_dim_), 0.0f);
  index_key_.assign(rows * size_t(index_dim_), 0.0f);
  index_gate_.assign(rows, 0.0f);
}

size_t LatentCache::bytes() const {
  return (latent_.size() + index_key_.size() + index_gate_.size()) * sizeof(float);
}

}  // namespace sparkglm
