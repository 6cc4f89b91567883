#pragma once
// The BF16 decode GEMV's kernels (gemv_bf16.cu), as Gemm (gemm.cu) composes them; gemm.h holds
// the contract: y = x W^T, FP32 sums, a row's bits independent of the rows beside it.
//
// Tensor-core path (m <= kGemvMaxRows, k a multiple of kGemvMmaK): mma.m16n8k16 with 16 W rows
// as the A operand and up to 32 x rows as B columns. A work item is a tile of 16 W rows and a
// slice of k (one of `splits`); a block's 4 warps take each a contiguous quarter of the slice, 32 k
// at a time in increasing order, and warp 0 adds the warps' sums in warp order. Lane (g, t) holds k
// 8t .. 8t + 7 of rows g and g + 8 (and of x row g) for each 32 k: the two MMAs take k 8t .. 8t + 3
// and 8t + 4 .. 8t + 7 at fragment slots 2t, 2t + 1, 2t + 8, 2t + 9 (the same permutation in A and
// B). Two kernels feed these same values to these same MMAs, so they give the same bits:
//   GemvKernel::kStream (the engine's for large weights): a grid of resident blocks (3 an SM on
//     the H200) takes the (tile, slice) items in turn; each warp copies its 16 rows' next 256 k
//     (512 contiguous bytes a row) into its own shared-memory stage with cp.async while it
//     computes the previous one, across items too;
//   GemvKernel::kRegisters (the 2026-12-02 kernel): one block a (tile, slice), 16-byte register
//     loads of 4 x 32 k ahead straight from global memory, up to 16 blocks an SM. Below
//     kGemvStreamBytes of weight (an expert's 16 MB) every load is in flight at once and this
//     kernel is the faster (G1, 2026-12-04: 14.0 against 14.9 us for [2048, 4096] at 1 row);
//     above it the stream's long runs a row win (the LM head: 300 against 496 us).
// GemvKernel::kAuto, the engine's, takes the one the weight's bytes call for.
// Other shapes take a CUDA-core kernel whose per-element chain does not depend on m either.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/gemm.h"

namespace sparkglm::cuda {

inline constexpr int64_t kGemvMmaK = 512;  // k of the tensor-core path: a multiple of this

// Whether gemv_bf16 takes m rows of depth k on tensor cores (else the CUDA-core kernel): the one
// rule gemv_bf16 and Gemm::decode_group share.
inline bool gemv_on_tensor_cores(int64_t m, int64_t k) {
  return m <= kGemvMaxRows && k % kGemvMmaK == 0;
}

// Blocks a tile of 16 W rows gets over k: 1 for weights of many rows; for few rows, doubled while
// the grid stays under about 8 blocks an SM and k still divides. From the shape alone.
int gemv_mma_splits(int64_t n, int64_t k);

// A split of k over `splits` slices a tile: room for the slices' partial sums [splits][m][n],
// which a second kernel adds in slice order (sum_split_partials).
struct GemvSplit {
  int splits = 1;
  float* partials = nullptr;
};

// The tensor-core GEMV of m <= kGemvMaxRows rows, k a multiple of kGemvMmaK * splits: y [m, n].
void gemv_mma(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
              const GemvSplit& split, GemvKernel kernel, cudaStream_t stream);

// The CUDA-core GEMV, any m and k % 8 == 0: each output one lane-strided FP32 chain and a warp sum.
void gemv_cuda_cores(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k,
                     float* y, cudaStream_t stream);

// gemv_cuda_cores of each of `count` <= kGemvGroupMax parts (gemm.h: GemvPart), all of m rows, in
// one launch: each part's blocks run the code its own launch runs, so its bits are that launch's.
void gemv_cuda_cores_group(const GemvPart* parts, int count, int64_t m, cudaStream_t stream);

}  // namespace sparkglm::cuda
