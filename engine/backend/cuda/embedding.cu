#include "engine/backend/cuda/embedding.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;

struct EmbedParams {
  const uint16_t* table;  // [vocab, d]
  const int32_t* ids;     // [rows]
  float* out;             // [rows, streams, d]
  int64_t vocab, d;
  int streams;
};

// Grid: rows. Each thread widens 8 BF16 values (one 16-byte load) and stores them to each stream.
__global__ void __launch_bounds__(kThreads) embed_kernel(const __grid_constant__ EmbedParams p) {
  pdl_wait();  // the ids of the kernel ahead
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const int32_t id = p.ids[row];
  const bool valid = id >= 0 && id < p.vocab;
  const uint4* src = reinterpret_cast<const uint4*>(p.table + (valid ? int64_t(id) : 0) * p.d);
  for (int64_t c = threadIdx.x; c < p.d / 8; c += blockDim.x) {
    const uint4 v = src[c];
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
    float4 lo, hi;
    lo.x = __uint_as_float(u[0] << 16), lo.y = __uint_as_float(u[0] & 0xffff0000u);
    lo.z = __uint_as_float(u[1] << 16), lo.w = __uint_as_float(u[1] & 0xffff0000u);
    hi.x = __uint_as_float(u[2] << 16), hi.y = __uint_as_float(u[2] & 0xffff0000u);
    hi.z = __uint_as_float(u[3] << 16), hi.w = __uint_as_float(u[3] & 0xffff0000u);
    if (!valid)
      lo = hi = make_float4(__int_as_float(0x7fc00000), __int_as_float(0x7fc00000),
                            __int_as_float(0x7fc00000), __int_as_float(0x7fc00000));
    for (int s = 0; s < p.streams; ++s) {
      float4* dst = reinterpret_cast<float4*>(p.out + (row * p.streams + s) * p.d) + 2 * c;
      dst[0] = lo;
      dst[1] = hi;
    }
  }
}

}  // namespace

void embed_tokens(const uint16_t* table, int64_t vocab, int64_t d, const int32_t* ids, int64_t rows,
                  int streams, float* out, cudaStream_t stream) {
  SPARKGLM_ASSERT(d % 8 == 0, "embed_tokens: hidden size must be a multiple of 8");
  if (rows <= 0) return;
  launch_dependent(embed_kernel, unsigned(rows), kThreads, 0, stream,
                   EmbedParams{table, ids, out, vocab, d, streams});
}

}  // namespace sparkglm::cuda
