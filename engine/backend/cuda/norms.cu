#include "engine/backend/cuda/norms.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/greedy_row.cuh"
#include "engine/backend/cuda/layer_norm_row.cuh"
#include "engine/backend/cuda/mtp_entry_row.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/backend/cuda/rms_row.cuh"
#include "engine/backend/cuda/runner_kernels.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

using rms_row::cached_width;
using rms_row::kThreads;

using RmsParams = rms_row::Params;

__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const __grid_constant__ RmsParams p) {
  pdl_trigger();  // a decode GEMV after it may start loading its weights
  pdl_wait();     // x (and add) of the kernel ahead
  __shared__ float scratch[32];
  rms_row::norm(p, blockIdx.x, scratch);
}

// Grid: (rows, 2); part 0 normalises the token's embedding row, part 1 the hidden state, each as
// rms_norm_kernel's cached path does, into its half of the row's BF16 concatenation. Part 0 takes
// the row's id from `ids` (read, or scanned here) and writes it to `picked` when that is given.
__global__ void __launch_bounds__(kThreads)
    mtp_entry_kernel(const __grid_constant__ MtpEntry e, GreedyPicks ids, int32_t* picked,
                     const float* h) {
  pdl_trigger();  // eh_proj after it may start loading its weights
  pdl_wait();     // the ids (or logits) and h of the kernels ahead
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int part = int(blockIdx.y);
  const int32_t id = part == 0 ? greedy_pick(ids, row) : 0;
  if (part == 0 && picked != nullptr && threadIdx.x == 0) picked[row] = id;
  mtp_entry_row(e, row, part, id, h + row * e.n, scratch);
}

using LayerNormParams = layer_norm_row::Params;

__global__ void __launch_bounds__(kThreads)
    layer_norm_kernel(const __grid_constant__ LayerNormParams p) {
  __shared__ float scratch[32];
  pdl_wait();
  pdl_trigger();
  layer_norm_row::norm(p, blockIdx.x, scratch);
}

__global__ void cast_kernel(const float* src, int64_t n, uint16_t* dst) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = f32_to_bf16_bits(src[i]);
}

}  // namespace

void rms_norm_rows(const float* x, const float* w, float eps, int64_t rows, int64_t n, float* y,
                   uint16_t* y_bf16, cudaStream_t stream) {
  if (rows <= 0) return;
  launch_dependent(rms_norm_kernel, unsigned(rows), kThreads, 0, stream,
                   RmsParams{x, w, y, y_bf16, n, eps, nullptr, nullptr});
}

void add_rms_norm_rows(float* x, const float* add, const float* w, float eps, int64_t rows,
                       int64_t n, float* y, uint16_t* y_bf16, cudaStream_t stream) {
  if (rows <= 0) return;
  if (!cached_width(n)) {  // wider rows: the two launches
    add_in_place(x, add, rows * n, stream);
    rms_norm_rows(x, w, eps, rows, n, y, y_bf16, stream);
    return;
  }
  launch_dependent(rms_norm_kernel, unsigned(rows), kThreads, 0, stream,
                   RmsParams{x, w, y, y_bf16, n, eps, add, x});
}

bool mtp_entry_fits(int64_t n) {
  return cached_width(n);
}

void mtp_entry_bf16(const MtpEntry& e, const int32_t* ids, const float* h, int64_t rows,
                    cudaStream_t stream) {
  mtp_entry_picked_bf16(e, GreedyPicks{ids, nullptr, e.vocab}, nullptr, h, rows, stream);
}

void mtp_entry_picked_bf16(const MtpEntry& e, const GreedyPicks& ids, int32_t* picked,
                           const float* h, int64_t rows, cudaStream_t stream) {
  SPARKGLM_ASSERT(mtp_entry_fits(e.n), "mtp_entry_bf16: a row wider than the cached norm's");
  SPARKGLM_ASSERT(ids.picks != nullptr || (ids.logits != nullptr && ids.vocab <= kGreedyBlockVocab),
                  "mtp_entry_bf16: ids scanned here need a vocabulary of one greedy block");
  if (rows <= 0) return;
  if (picked == ids.picks) picked = nullptr;  // read from there: nothing to write back
  launch_dependent(mtp_entry_kernel, dim3(unsigned(rows), 2), kThreads, 0, stream, e, ids, picked,
                   h);
}

void layer_norm_rows(const float* x, const float* w, const float* b, float eps, int64_t rows,
                     int64_t n, float* y, cudaStream_t stream) {
  if (rows <= 0) return;
  launch_dependent(layer_norm_kernel, unsigned(rows), kThreads, 0, stream,
                   LayerNormParams{x, w, b, y, n, eps});
}

void cast_f32_to_bf16(const float* src, int64_t n, uint16_t* dst, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  launch_dependent(cast_kernel, unsigned(blocks < 16384 ? blocks : 16384), kThreads, 0, stream, src,
                   n, dst);
}

}  // namespace sparkglm::cuda
