#pragma once
// MLA absorbed decode attention over the paged latent cache (MODEL.md section 4):
//   s_hj = scale * q~_h . c_j,  p_h = softmax_j(s_h),  ō_h = sum_j p_hj c_j   for j in the row's
//   set
// Latent records use runtime/latent_cache.h's byte layouts: bf16 (R BF16 values) or fp8_g128
// (R E4M3 bytes, then one FP32 scale per 128 values). A row attends either positions 0..len-1
// (dense) or an explicit list of positions (the DSA selection).
//
// Tensor cores (mma.m16n8k16, FP32 accumulate) compute both products for 16 heads at a time, so
// q~, the probabilities and (for fp8_g128) the dequantized latents enter them rounded to BF16;
// softmax bookkeeping stays FP32. Work splits into fixed runs of kMlaSplitTokens list entries,
// merged in increasing split order, so a row's result depends on its own length and list only,
// never on the batch it is in. A launch whose max_len fits one split is one kernel (the split
// kernel does the merge's arithmetic itself, bit for bit); longer ones are two.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

enum class LatentFormat { kBF16, kFp8G128 };

// R = kv_lora_rank. The kernels are templates over it with two instantiations, chosen at run time
// from MlaDecodeArgs::latent_dim: production's 512 (heads a multiple of 16) and tinyglm-micro's 64
// (any head count: the MMA's 16 rows are padded with zero queries, never stored; fp8_g128 records
// of 64 values would not be 16-byte aligned, so micro keeps bf16 latents). Others are refused.
inline constexpr int kMlaLatentDim = 512;
inline constexpr int kMlaMicroLatentDim = 64;
inline constexpr int kMlaSplitTokens = 128;

// Throws Error(kUnsupported) naming kv_lora_rank (or the KV dtype) unless the kernels serve them.
void check_latent_geometry(int latent_dim, LatentFormat format);

// Bytes of one token's latent record (host and device: the latent stores index pages by it).
__host__ __device__ inline int64_t latent_record_bytes(LatentFormat format,
                                                       int latent_dim = kMlaLatentDim) {
  const int64_t r = latent_dim;
  return format == LatentFormat::kBF16 ? r * 2 : r + 4 * (r / 128);
}

struct MlaDecodeArgs {
  int rows = 0;                    // B query rows
  int heads = 0;                   // H (a multiple of 16 at R = 512)
  const float* q_tilde = nullptr;  // [B, H, R]
  const uint8_t* pages = nullptr;  // [num_blocks, block_size, record bytes]
  LatentFormat format = LatentFormat::kBF16;
  int block_size = 0;
  const int32_t* block_table = nullptr;  // [B, table_stride]: physical block of each logical block
  int table_stride = 0;
  const int32_t* lengths = nullptr;   // [B]: entries attended by each row
  const int32_t* attended = nullptr;  // [B, max_len] positions, or null: row b attends 0..len-1
  int max_len = 0;                    // upper bound of lengths (sizes the split grid)
  float scale = 0.0f;
  float* workspace = nullptr;      // mla_decode_workspace_floats(rows, heads, max_len)
  float* o_bar = nullptr;          // [B, H, R]
  int latent_dim = kMlaLatentDim;  // R: kMlaLatentDim or kMlaMicroLatentDim
};

int64_t mla_decode_workspace_floats(int rows, int heads, int max_len,
                                    int latent_dim = kMlaLatentDim);

void mla_decode(const MlaDecodeArgs& args, cudaStream_t stream);

}  // namespace sparkglm::cuda
