#pragma once
// The paged MLA cache: per MLA layer (the MTP layer last), per token, the normalised latent
// c_kv, the indexer key k^I and the indexer pooling gate. Token at position j of a sequence lives
// in block table[j / block_size], slot j % block_size.
//
// Latents and indexer keys are stored in the pool's dtype: f32 (the reference), bf16, or fp8_g128
// (E4M3 with one FP32 scale of amax/448 per group of 128 values, round to nearest even); values go
// in through store_* and come out through load_*. Gates stay FP32 (one scalar per token).
// EngineFault::kFp8ScaleOffByOneExponent (a negative control, engine_fault.h) stores each fp8_g128
// scale doubled; every other fault is no concern of the cache's.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/engine_fault.h"

namespace sparkglm {

enum class KvDtype { kF32, kBF16, kFp8G128 };
const char* to_string(KvDtype t);
KvDtype kv_dtype_from_string(const std::string& name);  // "f32" | "bf16" | "fp8_g128"

// Bytes one vector of `dim` values takes in `dtype` (fp8_g128: dim bytes + 4 per group of 128).
size_t kv_vector_bytes(KvDtype dtype, int dim);

class LatentCache {
 public:
  LatentCache(const ModelConfig& config, int num_blocks, int block_size,
              KvDtype dtype = KvDtype::kF32, EngineFault fault = EngineFault::kNone);

  // Blocks that fit in `budget_bytes` for this config, block size and dtype.
  static int blocks_for_budget(const ModelConfig& config, int block_size, KvDtype dtype,
                               size_t budget_bytes);
  static size_t bytes_per_block(const ModelConfig& config, int block_size, KvDtype dtype);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int num_layers() const { return num_layers_; }
  int latent_dim() const { return latent_dim_; }
  int index_dim() const { return index_dim_; }
  KvDtype dtype() const { return dtype_; }

  void store_latent(int layer, const std::vector<int32_t>& table, int64_t pos, const float* v);
  void load_latent(int layer, const std::vector<int32_t>& table, int64_t pos, float* out) const;
  void store_index_key(int layer, const std::vector<int32_t>& table, int64_t pos, const float* v);
  void load_index_key(int layer, const std::vector<int32_t>& table, int64_t pos, float* out) const;
  float& index_gate_at(int layer, const std::vector<int32_t>& table, int64_t pos) {
    return index_gate_[row(layer, table, pos)];
  }
  float index_gate_at(int layer, const std::vector<int32_t>& table, int64_t pos) const {
    return index_gate_[row(layer, table, pos)];
  }
  size_t bytes() const;

  // One block's contents as bytes (bytes_per_block long): per layer, its latents, indexer keys
  // and gates in the pool's dtype. The prefix cache's disk tier keeps blocks in this form.
  void copy_block_out(int32_t block, std::byte* out) const;
  void copy_block_in(int32_t block, const std::byte* in);

 private:
  size_t row(int layer, const std::vector<int32_t>& table, int64_t pos) const {
    const size_t block = size_t(table[size_t(pos / block_size_)]);
    return (size_t(layer) * size_t(num_blocks_) + block) * size_t(block_size_) +
           size_t(pos % block_size_);
  }
  int num_blocks_, block_size_, num_layers_, latent_dim_, index_dim_;
  KvDtype dtype_;
  bool fp8_scale_doubled_;           // the negative control
  size_t latent_bytes_, key_bytes_;  // per token
  std::vector<std::byte> latent_, index_key_;
  std::vector<float> index_gate_;
};

}  // namespace sparkglm
