#pragma once
// The greedy rule on the device as an order-free maximum (sampling.h): each candidate's key holds
// the value's order-preserving bits above and ~id below, so the largest key is the largest value
// or, at equal values, the lowest id, whichever way the keys are compared or merged.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/sampling.h"

namespace sparkglm::cuda {

// Ids a block scans alone (sample_greedy's one-block rows; tinyglm-micro's 320).
constexpr int64_t kGreedyBlockVocab = 2048;

// -0 counts as +0 (equal values); NaN and -inf never make a key; 0 means no candidate.
__device__ __forceinline__ unsigned long long greedy_key(float v, int64_t i) {
  uint32_t u = v == 0.0f ? 0u : __float_as_uint(v);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<unsigned long long>(u) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}

// The token a merged key stands for (-1: no candidate).
__device__ __forceinline__ int32_t greedy_token(unsigned long long k) {
  return k == 0 ? -1 : int32_t(0xffffffffu - static_cast<uint32_t>(k & 0xffffffffu));
}

// The best key of x[begin, end), scanned by the whole block (blockDim.x a multiple of 32, at most
// 1024): every thread gets it. A block barrier: call it from every thread of the block.
__device__ __forceinline__ unsigned long long block_greedy_key(const float* x, int64_t begin,
                                                               int64_t end) {
  __shared__ unsigned long long warp_best[32];
  unsigned long long best = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float v = x[i];
    if (!isnan(v) && v > -INFINITY) {
      const unsigned long long k = greedy_key(v, i);
      best = k > best ? k : best;
    }
  }
  for (int m = 16; m > 0; m >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xffffffffu, best, m);
    best = o > best ? o : best;
  }
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
  __syncthreads();
  best = warp_best[0];
  for (int w = 1; w < int(blockDim.x >> 5); ++w) best = warp_best[w] > best ? warp_best[w] : best;
  __syncthreads();  // warp_best may be written again by a later call
  return best;
}

// Row `row`'s pick (greedy_picks): read, or scanned by the block (a barrier then: call it from
// every thread of the block; uniform across it either way). Every thread gets it.
__device__ __forceinline__ int32_t greedy_pick(const GreedyPicks& p, int64_t row) {
  if (p.picks) return p.picks[row];
  return greedy_token(block_greedy_key(p.logits + row * p.vocab, 0, p.vocab));
}

}  // namespace sparkglm::cuda
