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
//
// The KV shard (tensor parallelism, docs/parallel.md): with a LatentShard of N ranks, rank r
// stores the latents of the positions p with p % N == r only, so a block holds block_size / N
// latents on each rank (N must divide block_size) while the block table stays the same on every
// rank. Indexer keys and gates stay whole (the selection is computed on every rank). Storing or
// loading the latent of a position the rank does not own is an internal error.
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

// The positions of this cache's latents: p % ranks == rank. {0, 1}: every position (no shard).
struct LatentShard {
  int rank = 0, ranks = 1;
  bool owns(int64_t pos) const { return pos % ranks == rank; }
};

class LatentCache {
 public:
  // Throws Error(kInvalidArgument) for a non-positive size, a shard rank outside [0, ranks), or
  // a block size the shard's ranks do not divide.
  LatentCache(const ModelConfig& config, int num_blocks, int block_size,
              KvDtype dtype = KvDtype::kF32, EngineFault fault = EngineFault::kNone,
              LatentShard shard = {});

  // Blocks that fit in `budget_bytes` for this config, block size and dtype, on one rank of a
  // shard of `latent_ranks` ranks (1: the whole cache).
  static int blocks_for_budget(const ModelConfig& config, int block_size, KvDtype dtype,
                               size_t budget_bytes, int latent_ranks = 1);
  // Per block on one rank: layers * (block_size / latent_ranks latents + block_size indexer keys
  // and gates). Throws Error(kInvalidArgument) when latent_ranks does not divide block_size.
  static size_t bytes_per_block(const ModelConfig& config, int block_size, KvDtype dtype,
                                int latent_ranks = 1);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int num_layers() const { return num_layers_; }
  int latent_dim() const { return latent_dim_; }
  int index_dim() const { return index_dim_; }
  KvDtype dtype() const { return dtype_; }
  const LatentShard& shard() const { return shard_; }
  bool owns(int64_t pos) const { return shard_.owns(pos); }
  size_t block_bytes() const;  // bytes_per_block of this cache's geometry and shard

  // Only for a position this rank owns (owns(pos)).
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

  // One block's contents as bytes (block_bytes long): per layer, its latents (this rank's slots),
  // indexer keys and gates in the pool's dtype. The prefix cache's disk tier keeps blocks in this
  // form.
  void copy_block_out(int32_t block, std::byte* out) const;
  void copy_block_in(int32_t block, const std::byte* in);

 private:
  size_t row(int layer, const std::vector<int32_t>& table, int64_t pos) const {
    const size_t block = size_t(table[size_t(pos / block_size_)]);
    return (size_t(layer) * size_t(num_blocks_) + block) * size_t(block_size_) +
           size_t(pos % block_size_);
  }
  size_t latent_row(int layer, const std::vector<int32_t>& table, int64_t pos) const;
  int num_blocks_, block_size_, num_layers_, latent_dim_, index_dim_;
  KvDtype dtype_;
  LatentShard shard_;
  int latent_slots_;                 // latents a block holds on this rank: block_size / shard ranks
  bool fp8_scale_doubled_;           // the negative control
  size_t latent_bytes_, key_bytes_;  // per token
  std::vector<std::byte> latent_, index_key_;
  std::vector<float> index_gate_;
};

}  // namespace sparkglm
