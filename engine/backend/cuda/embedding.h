#pragma once
// Token embedding: each token's BF16 table row widened to FP32 and copied into every residual
// stream (MODEL.md section 2: the embedding is copied into all hc_mult streams).
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// table: [vocab, d] BF16 bits; ids: [rows] on the device; out: [rows, streams, d] FP32.
// An id outside [0, vocab) writes NaN rows (the host validated ids before they reached here; a
// NaN makes any slip visible instead of reading another token's row).
void embed_tokens(const uint16_t* table, int64_t vocab, int64_t d, const int32_t* ids, int64_t rows,
                  int streams, float* out, cudaStream_t stream);

}  // namespace sparkglm::cuda
