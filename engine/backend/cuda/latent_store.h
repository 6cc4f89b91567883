#pragma once
// Writes into the paged MLA cache on the device (MODEL.md section 4), in the byte layouts of
// runtime/latent_cache.h that mla_decode reads: bf16 records are R BF16 values;
// fp8_g128 records are R E4M3 bytes then one FP32 scale per group of 128 values (scale =
// amax/448, byte = E4M3(v * (1/scale)) rounded to nearest even, a zero group gives scale 0 and
// zero bytes). Every bit equals LatentCache::store_latent's. Indexer keys and pooling gates stay
// FP32 on the device (their pools: dsa_indexer.h). Both are plain scatter kernels: graph-safe, no
// allocation.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/mla_decode.h"

namespace sparkglm::cuda {

// Row i's latent goes to record page_rows[i] of pages, where page_rows[i] = physical_block *
// block_size + position % block_size, computed by the caller. latents: [rows, R] FP32;
// page_rows: [rows] on the device; pages: [num_blocks * block_size, latent_record_bytes].
// R must be a multiple of 128 (fp8_g128) or of 2 (bf16) and at most 4096.
void store_latents(const float* latents, int64_t rows, int R, LatentFormat format,
                   const int32_t* page_rows, uint8_t* pages, cudaStream_t stream);

// key_pages[page_rows[i]] = keys[i] and gate_pages[page_rows[i]] = gates[i].
// keys: [rows, d_i]; gates: [rows]; key_pages: [num_blocks * block_size, d_i];
// gate_pages: [num_blocks * block_size].
void store_index_keys(const float* keys, const float* gates, int64_t rows, int d_i,
                      const int32_t* page_rows, float* key_pages, float* gate_pages,
                      cudaStream_t stream);

// An MLA step's per-row work before it attends (cuda_mla_block.cu), in one launch where it took
// five: the latent RMS-normed in place and stored (store_latents), the indexer key LayerNormed in
// place and stored with its gate (store_index_keys), and the query latent RMS-normed in place with
// its BF16 bits. Every value has the bits of rms_norm_rows, layer_norm_rows and the two stores
// launched one by one. Rows are 0..rows-1 of each [rows, width] buffer; page_rows as above.
struct MlaCacheRows {
  const int32_t* page_rows;
  float* latent;  // [rows, R]
  const float* latent_norm;
  int R;
  LatentFormat format;
  uint8_t* latent_pages;
  float* keys;  // [rows, d_i]
  const float* key_norm_w;
  const float* key_norm_b;
  float key_eps;
  const float* gates;  // [rows]
  int d_i;
  float* key_pages;
  float* gate_pages;
  float* cq;  // [rows, ql]
  const float* cq_norm;
  uint16_t* cq_bf16;
  int ql;
  float eps;  // the RMS norms'
};
void store_mla_rows(const MlaCacheRows& rows_in, int64_t rows, cudaStream_t stream);

}  // namespace sparkglm::cuda
