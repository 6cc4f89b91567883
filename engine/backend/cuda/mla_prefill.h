#pragma once
// MLA attention for a prefill chunk of one sequence, causal over the paged latent cache (MODEL.md
// section 4, absorbed form): query row t of the chunk sits at position start + t and attends
// positions 0 .. start + t, i.e. the cached prefix and the chunk's own rows up to itself (their
// latents must already be in the pages).
//
// The prefill kernel gives each query row one thread block for all 64 heads: every latent tile
// goes into shared memory once and feeds the 64 heads' scores and values (tensor cores, BF16 q~ and
// probabilities, FP32 accumulation and softmax, as mla_decode.h). The row's list is walked from
// its first entry in tiles of 64 with an online softmax, with no splits and no atomics, so a row's
// result depends on its own position (or list) only: not on the chunk, the rows sharing the launch
// or the run. It differs from decode at the same position in rounding only (decode merges 128-entry
// splits). Where it does not apply (heads != 64, or a device without 224 KB of shared memory per
// block, e.g. sm_121; or R != 512, e.g. tinyglm-micro) and when asked to, prefill runs the first
// path: the decode kernel with one decode row per query row, bit for bit what decode gives at
// each position.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/mla_decode.h"

namespace sparkglm::cuda {

struct MlaPrefillArgs {
  int rows = 0;                    // T query rows
  int heads = 0;                   // H (a multiple of 16 at R = 512)
  int start = 0;                   // tokens of the sequence before the chunk
  const float* q_tilde = nullptr;  // [T, H, R]
  const uint8_t* pages = nullptr;  // [num_blocks, block_size, record bytes]
  LatentFormat format = LatentFormat::kBF16;
  int block_size = 0;
  const int32_t* block_table = nullptr;  // [table_len] the sequence's physical blocks, on device
  int table_len = 0;                     // >= ceil((start + T) / block_size)
  float scale = 0.0f;
  void* workspace = nullptr;  // mla_prefill_workspace_bytes(), 256-byte aligned (first path only)
  float* o_bar = nullptr;     // [T, H, R]
  bool decode_path = false;   // force the first path (tests and comparisons)
  int latent_dim = kMlaLatentDim;  // R (mla_decode.h); the prefill kernel serves kMlaLatentDim
};

size_t mla_prefill_workspace_bytes(int rows, int heads, int start, int table_len,
                                   int latent_dim = kMlaLatentDim);

// Whether the prefill kernel serves `heads` heads of R = latent_dim on the current device.
bool mla_prefill_kernel_applies(int heads, int latent_dim = kMlaLatentDim);

// Throws Error(kInvalidArgument) when the table cannot hold start + rows tokens.
void mla_prefill(const MlaPrefillArgs& args, cudaStream_t stream);

// Rows that each attend their own length or list of positions (MlaDecodeArgs, e.g. the DSA
// selections of a prefill chunk's sparse rows) through the prefill kernel: one block per row, all
// heads, each gathered latent loaded once. Falls back to mla_decode (which uses args.workspace)
// where the kernel does not apply. Decode batches keep mla_decode: few rows need its splits.
void mla_prefill_lists(const MlaDecodeArgs& args, cudaStream_t stream);

}  // namespace sparkglm::cuda
