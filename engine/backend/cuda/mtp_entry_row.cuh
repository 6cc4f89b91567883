#pragma once
// One half of one row of the MTP module's input as mtp_entry_kernel computes it (norms.cu), for
// the kernels that find the row's token or state first (the draft chain's advance,
// draft_chain.cu): with it they write the bits mtp_entry_bf16 would.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/rms_row.cuh"

namespace sparkglm::cuda {

// Part 0: enorm(embed(id)) (NaN for an id outside the vocabulary, as embed_tokens writes); part 1:
// hnorm(h_row). Written as BF16 into that half of cat's row `row`. A block of rms_row::kThreads
// threads (a barrier: every thread calls it); only for mtp_entry_fits(e.n).
__device__ __forceinline__ void mtp_entry_row(const MtpEntry& e, int64_t row, int part, int32_t id,
                                              const float* h_row, float* scratch) {
  using rms_row::kCachedVec;
  using rms_row::kThreads;
  const int nv = int(e.n / 4);
  const bool valid = id >= 0 && id < e.vocab;
  const float* w = part == 0 ? e.e_norm : e.h_norm;
  float4 xv[kCachedVec], wv[kCachedVec];
#pragma unroll
  for (int u = 0; u < kCachedVec; ++u) {
    const int i = threadIdx.x + u * kThreads;
    wv[u] = rms_row::load4_or(w, i, i < nv, 1.0f);
    if (part == 1) {
      xv[u] = rms_row::load4_or(h_row, i, i < nv, 0.0f);
    } else if (i >= nv) {
      xv[u] = make_float4(0, 0, 0, 0);
    } else if (!valid) {
      const float nan = __int_as_float(0x7fc00000);
      xv[u] = make_float4(nan, nan, nan, nan);
    } else {
      const uint2 b = reinterpret_cast<const uint2*>(e.table + int64_t(id) * e.n)[i];
      xv[u] = make_float4(bf16_bits_to_f32(uint16_t(b.x)), bf16_bits_to_f32(uint16_t(b.x >> 16)),
                          bf16_bits_to_f32(uint16_t(b.y)), bf16_bits_to_f32(uint16_t(b.y >> 16)));
    }
  }
  const float r = rms_row::rms_scale(xv, e.n, e.eps, scratch);
  uint16_t* out = e.cat + row * 2 * e.n + part * e.n;
#pragma unroll
  for (int u = 0; u < kCachedVec; ++u) {
    const int i = threadIdx.x + u * kThreads;
    if (i >= nv) continue;
    rms_row::store_bf16x4(out + 4 * i, rms_row::scaled(xv[u], r, wv[u]));
  }
}

}  // namespace sparkglm::cuda
