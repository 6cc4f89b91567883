#pragma once
// The paged MLA cache: per MLA layer (the MTP layer last), per token, the normalised latent
// c_kv, the indexer key k^I and the indexer pooling gate. Token at position j of a sequence lives
// in block table[j / block_size], slot j % block_size. FP32 on the CPU reference backend.
#include <cstdint>
#include <vector>

#include "engine/model/config.h"

namespace sparkglm {

class LatentCache {
 public:
  LatentCache(const ModelConfig& config, int num_blocks, int block_size);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int num_layers() const { return num_layers_; }
  int latent_dim() const { return latent_dim_; }
  int index_dim() const { return index_dim_; }

  float* latent(int layer, int block, int slot) {  // [kv_lora_rank]
    return &latent_[row(layer, block, slot) * size_t(latent_dim_)];
  }
  float* index_key(int layer, int block, int slot) {  // [index_head_dim]
    return &index_key_[row(layer, block, slot) * size_t(index_dim_)];
  }
  float* index_gate(int layer, int block, int slot) {  // [1]
    return &index_gate_[row(layer, block, slot)];
  }
  // The same, addressed by a sequence's block table and absolute position.
  float* latent_at(int layer, const std::vector<int32_t>& table, int64_t pos) {
    return latent(layer, table[size_t(pos / block_size_)], int(pos % block_size_));
  }
  float* index_key_at(int layer, const std::vector<int32_t>& table, int64_t pos) {
    return index_key(layer, table[size_t(pos / block_size_)], int(pos % block_size_));
  }
  float* index_gate_at(int layer, const std::vector<int32_t>& table, int64_t pos) {
    return index_gate(layer, table[size_t(pos / block_size_)], int(pos % block_size_));
  }
  size_t bytes() const;

 private:
  size_t row(int layer, int block, int slot) const {
    return (size_t(layer) * size_t(num_blocks_) + size_t(block)) * size_t(block_size_) + size_t(slot);
  }
  int num_blocks_, block_size_, num_layers_, latent_dim_, index_dim_;
  std::vector<float> latent_, index_key_, index_gate_;
};

}  // namespace sparkglm
