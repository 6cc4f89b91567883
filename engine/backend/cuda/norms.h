#pragma once
// Row norms of MODEL.md in FP32 (one block per row, so a row never depends on other rows), two
// fusions of them (a residual add into the norm after it; the MTP module's input), and the FP32 ->
// BF16 cast that feeds the projections.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/sampling.h"

namespace sparkglm::cuda {

// y = x * rsqrt(mean(x^2) + eps) * w  (w may be null). x, y: [rows, n] FP32, y may alias x;
// y_bf16: [rows, n] BF16 bits of y, or null.
void rms_norm_rows(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* y,
                   uint16_t* y_bf16, cudaStream_t stream);

// x += add, then y = rms_norm(x) as rms_norm_rows computes it (one launch for rows of up to 4096
// values; the bits of add_in_place then rms_norm_rows). y must not alias x or add.
void add_rms_norm_rows(float* x, const float* add, const float* w, float eps, int64_t rows,
                       int64_t n, float* y, uint16_t* y_bf16, cudaStream_t stream);

// The MTP module's input in one launch (MODEL.md section 6): cat[t] = [enorm(embed(ids[t]));
// hnorm(h[t])] as BF16 bits, each half the bits embed_tokens, rms_norm_rows and concat_bf16 give
// (an id outside the vocabulary gives NaN). Only for mtp_entry_fits(n): rows of up to 4096
// values, n % 4 == 0.
struct MtpEntry {
  const uint16_t* table;  // [vocab, n] BF16
  int64_t vocab;
  const float *e_norm, *h_norm;  // [n] each
  float eps;
  int64_t n;
  uint16_t* cat;  // [rows, 2n]
};
bool mtp_entry_fits(int64_t n);
// h: [rows, n].
void mtp_entry_bf16(const MtpEntry& e, const int32_t* ids, const float* h, int64_t rows,
                    cudaStream_t stream);
// The same on each row's greedy pick (sampling.h: greedy_picks; a scanned one is scanned in this
// launch), which it also writes to picked[row] when `picked` is given.
void mtp_entry_picked_bf16(const MtpEntry& e, const GreedyPicks& ids, int32_t* picked,
                           const float* h, int64_t rows, cudaStream_t stream);

// y = (x - mean) * rsqrt(var + eps) * w + b (population variance). x, y: [rows, n] FP32.
void layer_norm_rows(const float* x, const float* w, const float* b, float eps, int64_t rows,
                     int64_t n, float* y, cudaStream_t stream);

// dst: [n] BF16 bits, round to nearest even.
void cast_f32_to_bf16(const float* src, int64_t n, uint16_t* dst, cudaStream_t stream);

}  // namespace sparkglm::cuda
