#pragma once
// MLA attention for a prefill chunk of one sequence, causal over the paged latent cache (MODEL.md
// section 4, absorbed form): query row t of the chunk sits at position start + t and attends
// positions 0 .. start + t, i.e. the cached prefix and the chunk's own rows up to itself (their
// latents must already be in the pages). It runs the decode kernel (mla_decode.h) with one decode
// row per query row, each row given the sequence's block table and its causal length, so a
// prefill row's result is the one decode would give at that position, bit for bit. This is the
// first prefill path, not the fast one: every row re-reads the shared prefix, where a prefill
// kernel would tile query rows against each latent tile once (or use the un-absorbed form).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/mla_decode.h"

namespace sparkglm::cuda {

struct MlaPrefillArgs {
  int rows = 0;                    // T query rows
  int heads = 0;                   // H (a multiple of 16)
  int start = 0;                   // tokens of the sequence before the chunk
  const float* q_tilde = nullptr;  // [T, H, R]
  const uint8_t* pages = nullptr;  // [num_blocks, block_size, record bytes]
  LatentFormat format = LatentFormat::kBF16;
  int block_size = 0;
  const int32_t* block_table = nullptr;  // [table_len] the sequence's physical blocks, on device
  int table_len = 0;                     // >= ceil((start + T) / block_size)
  float scale = 0.0f;
  void* workspace = nullptr;  // mla_prefill_workspace_bytes(), 256-byte aligned
  float* o_bar = nullptr;     // [T, H, R]
};

size_t mla_prefill_workspace_bytes(int rows, int heads, int start, int table_len);

// Throws Error(kInvalidArgument) when the table cannot hold start + rows tokens.
void mla_prefill(const MlaPrefillArgs& args, cudaStream_t stream);

}  // namespace sparkglm::cuda
