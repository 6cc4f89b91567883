#include "engine/runtime/latent_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/core/dtype.h"
#include "engine/core/error.h"

namespace sparkglm {

namespace {

constexpr int kGroup = 128;  // fp8_g128: values per scale

int num_groups(int dim) {
  return (dim + kGroup - 1) / kGroup;
}

// scale_doubled: the negative control's fp8_g128 scale, one exponent too high.
void quantize(KvDtype t, const float* v, int dim, std::byte* out, bool scale_doubled) {
  switch (t) {
    case KvDtype::kF32:
      std::memcpy(out, v, size_t(dim) * sizeof(float));
      return;
    case KvDtype::kBF16:
      for (int i = 0; i < dim; ++i) {
        const uint16_t h = f32_to_bf16(v[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case KvDtype::kFp8G128: {
      // [dim] E4M3 bytes, then one FP32 scale per group: scale = amax / 448 (E4M3's largest).
      auto* scales = out + dim;
      for (int g = 0; g < num_groups(dim); ++g) {
        const int lo = g * kGroup, hi = std::min(dim, lo + kGroup);
        float amax = 0.0f;
        for (int i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(v[i]));
        const float scale = amax / 448.0f;
        const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        for (int i = lo; i < hi; ++i) out[i] = std::byte(f32_to_e4m3(v[i] * inv));
        const float stored = scale_doubled ? 2.0f * scale : scale;
        std::memcpy(scales + 4 * g, &stored, 4);
      }
      return;
    }
  }
}

void dequantize(KvDtype t, const std::byte* in, int dim, float* out) {
  switch (t) {
    case KvDtype::kF32:
      std::memcpy(out, in, size_t(dim) * sizeof(float));
      return;
    case KvDtype::kBF16:
      for (int i = 0; i < dim; ++i) {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
    case KvDtype::kFp8G128: {
      const auto* scales = in + dim;
      for (int g = 0; g < num_groups(dim); ++g) {
        float scale;
        std::memcpy(&scale, scales + 4 * g, 4);
        const int lo = g * kGroup, hi = std::min(dim, lo + kGroup);
        for (int i = lo; i < hi; ++i) out[i] = e4m3_to_f32(uint8_t(in[i])) * scale;
      }
      return;
    }
  }
}

}  // namespace

const char* to_string(KvDtype t) {
  switch (t) {
    case KvDtype::kF32:
      return "f32";
    case KvDtype::kBF16:
      return "bf16";
    case KvDtype::kFp8G128:
      return "fp8_g128";
  }
  return "?";
}

KvDtype kv_dtype_from_string(const std::string& name) {
  if (name == "f32") return KvDtype::kF32;
  if (name == "bf16") return KvDtype::kBF16;
  if (name == "fp8_g128") return KvDtype::kFp8G128;
  throw Error(ErrorKind::kInvalidArgument,
              "--kv-cache-dtype: expected bf16, fp8_g128 or f32, got \"" + name + "\"");
}

size_t kv_vector_bytes(KvDtype dtype, int dim) {
  switch (dtype) {
    case KvDtype::kF32:
      return size_t(dim) * 4;
    case KvDtype::kBF16:
      return size_t(dim) * 2;
    case KvDtype::kFp8G128:
      return size_t(dim) + 4 * size_t(num_groups(dim));
  }
  return 0;
}

namespace {

int mla_cache_layers(const ModelConfig& config) {
  return config.num_mla_layers() + (config.mtp_layer() >= 0 ? 1 : 0);
}

void check_latent_ranks(int block_size, int latent_ranks) {
  if (latent_ranks < 1 || block_size % latent_ranks != 0)
    throw Error(ErrorKind::kInvalidArgument,
                "KV shard: --block-size " + std::to_string(block_size) +
                    " is not divisible by the tensor-parallel size " +
                    std::to_string(latent_ranks) +
                    " (each rank stores every N-th position of a block; use a block size that "
                    "is a multiple of it, or --kv-shard off)");
}

}  // namespace

size_t LatentCache::bytes_per_block(const ModelConfig& config, int block_size, KvDtype dtype,
                                    int latent_ranks) {
  check_latent_ranks(block_size, latent_ranks);
  const size_t latents =
      size_t(block_size / latent_ranks) * kv_vector_bytes(dtype, config.kv_lora_rank);
  const size_t keys =
      size_t(block_size) * (kv_vector_bytes(dtype, config.index_head_dim) + sizeof(float));
  return size_t(mla_cache_layers(config)) * (latents + keys);
}

int LatentCache::blocks_for_budget(const ModelConfig& config, int block_size, KvDtype dtype,
                                   size_t budget_bytes, int latent_ranks) {
  return int(std::min<size_t>(
      budget_bytes / bytes_per_block(config, block_size, dtype, latent_ranks), INT32_MAX));
}

LatentCache::LatentCache(const ModelConfig& config, int num_blocks, int block_size, KvDtype dtype,
                         EngineFault fault, LatentShard shard)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      num_layers_(mla_cache_layers(config)),
      latent_dim_(config.kv_lora_rank),
      index_dim_(config.index_head_dim),
      dtype_(dtype),
      shard_(shard),
      latent_slots_(shard.ranks > 0 ? block_size / shard.ranks : 0),
      fp8_scale_doubled_(fault == EngineFault::kFp8ScaleOffByOneExponent),
      latent_bytes_(kv_vector_bytes(dtype, config.kv_lora_rank)),
      key_bytes_(kv_vector_bytes(dtype, config.index_head_dim)) {
  if (num_blocks <= 0 || block_size <= 0)
    throw Error(ErrorKind::kInvalidArgument,
                "latent cache: expected positive block count and size");
  if (shard.rank < 0 || shard.rank >= shard.ranks)
    throw Error(ErrorKind::kInvalidArgument, "latent cache: shard rank " +
                                                 std::to_string(shard.rank) + " is not in [0, " +
                                                 std::to_string(shard.ranks) + ")");
  check_latent_ranks(block_size, shard.ranks);
  const size_t rows = size_t(num_layers_) * size_t(num_blocks) * size_t(block_size);
  latent_.assign(size_t(num_layers_) * size_t(num_blocks) * size_t(latent_slots_) * latent_bytes_,
                 std::byte{0});
  index_key_.assign(rows * key_bytes_, std::byte{0});
  index_gate_.assign(rows, 0.0f);
}

// Position p of a block is slot p % block_size; this rank's slots are those with slot % ranks ==
// rank (ranks divides block_size), stored densely as slot / ranks.
size_t LatentCache::latent_row(int layer, const std::vector<int32_t>& table, int64_t pos) const {
  SPARKGLM_ASSERT(owns(pos), "latent cache: a latent of a position another rank owns");
  const size_t block = size_t(table[size_t(pos / block_size_)]);
  return (size_t(layer) * size_t(num_blocks_) + block) * size_t(latent_slots_) +
         size_t(pos % block_size_) / size_t(shard_.ranks);
}

size_t LatentCache::block_bytes() const {
  return size_t(num_layers_) * (size_t(latent_slots_) * latent_bytes_ +
                                size_t(block_size_) * (key_bytes_ + sizeof(float)));
}

void LatentCache::store_latent(int layer, const std::vector<int32_t>& table, int64_t pos,
                               const float* v) {
  quantize(dtype_, v, latent_dim_, &latent_[latent_row(layer, table, pos) * latent_bytes_],
           fp8_scale_doubled_);
}
void LatentCache::load_latent(int layer, const std::vector<int32_t>& table, int64_t pos,
                              float* out) const {
  dequantize(dtype_, &latent_[latent_row(layer, table, pos) * latent_bytes_], latent_dim_, out);
}
void LatentCache::store_index_key(int layer, const std::vector<int32_t>& table, int64_t pos,
                                  const float* v) {
  quantize(dtype_, v, index_dim_, &index_key_[row(layer, table, pos) * key_bytes_],
           fp8_scale_doubled_);
}
void LatentCache::load_index_key(int layer, const std::vector<int32_t>& table, int64_t pos,
                                 float* out) const {
  dequantize(dtype_, &index_key_[row(layer, table, pos) * key_bytes_], index_dim_, out);
}

void LatentCache::copy_block_out(int32_t block, std::byte* out) const {
  SPARKGLM_ASSERT(block >= 0 && block < num_blocks_, "latent cache: block out of range");
  const size_t bs = size_t(block_size_);
  for (int layer = 0; layer < num_layers_; ++layer) {
    const size_t first = (size_t(layer) * size_t(num_blocks_) + size_t(block)) * bs;
    const size_t slots = size_t(latent_slots_);
    const size_t first_latent = (size_t(layer) * size_t(num_blocks_) + size_t(block)) * slots;
    out = std::copy_n(&latent_[first_latent * latent_bytes_], slots * latent_bytes_, out);
    out = std::copy_n(&index_key_[first * key_bytes_], bs * key_bytes_, out);
    std::memcpy(out, &index_gate_[first], bs * sizeof(float));
    out += bs * sizeof(float);
  }
}

void LatentCache::copy_block_in(int32_t block, const std::byte* in) {
  SPARKGLM_ASSERT(block >= 0 && block < num_blocks_, "latent cache: block out of range");
  const size_t bs = size_t(block_size_);
  for (int layer = 0; layer < num_layers_; ++layer) {
    const size_t first = (size_t(layer) * size_t(num_blocks_) + size_t(block)) * bs;
    const size_t slots = size_t(latent_slots_);
    const size_t first_latent = (size_t(layer) * size_t(num_blocks_) + size_t(block)) * slots;
    std::copy_n(in, slots * latent_bytes_, &latent_[first_latent * latent_bytes_]);
    in += slots * latent_bytes_;
    std::copy_n(in, bs * key_bytes_, &index_key_[first * key_bytes_]);
    in += bs * key_bytes_;
    std::memcpy(&index_gate_[first], in, bs * sizeof(float));
    in += bs * sizeof(float);
  }
}

size_t LatentCache::bytes() const {
  return latent_.size() + index_key_.size() + index_gate_.size() * sizeof(float);
}

}  // namespace sparkglm
