#include "engine/backend/cuda/sampling.h"

#include <algorithm>
#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/greedy_row.cuh"
#include "engine/backend/cuda/pdl.cuh"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ void take(float v, int64_t i, float& bv, int64_t& bi) {
  if (i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi))) bv = v, bi = i;
}

// Grid: rows. Each thread scans a strided slice, then (value, id) reductions.
__global__ void __launch_bounds__(kThreads)
    greedy_kernel(const float* logits, int64_t vocab, int32_t* tokens) {
  __shared__ float sv[kThreads / 32];
  __shared__ int64_t si[kThreads / 32];
  const float* x = logits + int64_t(blockIdx.x) * vocab;
  float bv = -INFINITY;
  int64_t bi = -1;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = x[i];
    if (!isnan(v) && v > -INFINITY) take(v, i, bv, bi);
  }
  for (int m = 16; m > 0; m >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, m);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, m);
    take(ov, oi, bv, bi);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) take(sv[w], si[w], bv, bi);
    tokens[blockIdx.x] = int32_t(bi);
  }
}

constexpr int kSplitThreads = 256;
constexpr int64_t kSplitMinSpan = kGreedyBlockVocab;  // values per block at least
constexpr int kSplitMaxBlocks = 64;

// Grid: (blocks per row, rows). Block b scans its contiguous span of the row. With one block a
// row (a vocabulary of at most kSplitMinSpan: tinyglm-micro's 320) the block's best is the row's,
// so it writes the token itself and the finishing launch is not needed.
__global__ void __launch_bounds__(kSplitThreads)
    greedy_split_kernel(const float* logits, int64_t vocab, int64_t span, unsigned long long* keys,
                        int32_t* tokens) {
  pdl_wait();  // the head's logits
  pdl_trigger();
  const float* x = logits + int64_t(blockIdx.y) * vocab;
  const int64_t begin = int64_t(blockIdx.x) * span;
  const int64_t end = begin + span < vocab ? begin + span : vocab;
  const unsigned long long best = block_greedy_key(x, begin, end);
  if (threadIdx.x == 0) {
    if (gridDim.x == 1) {
      tokens[blockIdx.y] = greedy_token(best);
    } else if (best != 0) {
      atomicMax(keys + blockIdx.y, best);
    }
  }
}

// One thread per row: the token from the merged key, and the key back to zero.
__global__ void greedy_finish_kernel(int64_t rows, unsigned long long* keys, int32_t* tokens) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  tokens[r] = greedy_token(keys[r]);
  keys[r] = 0;
}

}  // namespace

void sample_greedy(const float* logits, int64_t rows, int64_t vocab, int32_t* tokens,
                   cudaStream_t stream, unsigned long long* scratch) {
  if (rows <= 0) return;
  if (scratch == nullptr) {
    greedy_kernel<<<unsigned(rows), kThreads, 0, stream>>>(logits, vocab, tokens);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const int64_t blocks = std::min<int64_t>(
      kSplitMaxBlocks, std::max<int64_t>(1, (vocab + kSplitMinSpan - 1) / kSplitMinSpan));
  const int64_t span = (vocab + blocks - 1) / blocks;
  launch_dependent(greedy_split_kernel, dim3(unsigned(blocks), unsigned(rows)), kSplitThreads, 0,
                   stream, logits, vocab, span, scratch, tokens);
  if (blocks == 1) return;  // the one block wrote the tokens (scratch untouched)
  greedy_finish_kernel<<<unsigned((rows + 255) / 256), 256, 0, stream>>>(rows, scratch, tokens);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

GreedyPicks greedy_picks(const float* logits, int64_t rows, int64_t vocab, int32_t* picks,
                         cudaStream_t stream, unsigned long long* scratch) {
  if (vocab <= kGreedyBlockVocab) return {nullptr, logits, vocab};
  sample_greedy(logits, rows, vocab, picks, stream, scratch);
  return {picks, logits, vocab};
}

}  // namespace sparkglm::cuda
