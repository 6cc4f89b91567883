#pragma once
// Grouped GEMM for the prefill MoE experts: y[r] = a[a_rows[r]] W_g^T for every grouped row r of
// every group g (an expert) in one launch, with the group boundaries read on the device only, so
// that no group size travels to the host. BF16 operands, FP32 accumulation on tensor cores
// (mma.m16n8k16 through ldmatrix, cp.async pipeline; sm_80 and later, sm_90a and sm_121 alike).
//
// Work: tiles of tile_rows grouped rows by 128 output columns, enumerated group by group, then by
// column tile, then by row tile (the row tiles of one weight tile run side by side and share it
// through L2). grouped_gemm_plan writes the tiles' prefix per group; the GEMM launches a grid
// sized for the host's upper bound of rows and its blocks past the real tiles exit at once.
//
// Numerics: every output element is one row's dot product with one weight row, summed by the MMA
// k16 step after k16 step in k order, whatever the tile size or the row's place in its tile; no
// split-K. A row's result is therefore independent of the other rows in its group and of the
// other groups (the routing of other tokens), and repeatable bit for bit.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

struct GroupedGemmArgs {
  int groups = 0;                         // G
  int tile_rows = 128;                    // 64 or 128 grouped rows per tile, as planned
  const int32_t* offsets = nullptr;       // [G + 1] device: group g owns rows [offsets[g], [g+1])
  const int32_t* tile_offsets = nullptr;  // [G + 1] device, written by grouped_gemm_plan
  int64_t max_rows = 0;                   // host upper bound of offsets[G]: sizes the grid
  const uint16_t* a = nullptr;            // BF16 rows of k values (16-byte aligned)
  const int32_t* a_rows = nullptr;        // [offsets[G]] row of `a` each grouped row reads; null: r
  const uint16_t* const* w = nullptr;     // [w_count] device array of device weight pointers
  int w_count = 0;                        // groups g >= w_count use w_last (the shared expert)
  const uint16_t* w_last = nullptr;
  int64_t n = 0;  // output columns (a multiple of 8)
  int64_t k = 0;  // reduction length (a multiple of 8)
};

// tile_offsets[g] = sum over groups before g of ceil(rows / tile_rows); [G] = the total.
void grouped_gemm_plan(const int32_t* offsets, int groups, int tile_rows, int32_t* tile_offsets,
                       cudaStream_t stream);

// W_g: [n, k] BF16 row-major (nn.Linear). y: [rows, n] FP32; only rows inside groups are written.
void grouped_gemm(const GroupedGemmArgs& a, float* y, cudaStream_t stream);

// W_g: [2n, k], gate rows then up rows. h[r][c] = BF16(SiLU(min(gate, limit)) * clamp(up, -limit,
// limit)) (no clamp for limit <= 0): cpu::swiglu_forward's activation on the FP32 products, so the
// [rows, 2n] FP32 intermediate never reaches memory. h: [rows, n] BF16.
void grouped_gemm_swiglu(const GroupedGemmArgs& a, float clamp_limit, uint16_t* h,
                         cudaStream_t stream);

}  // namespace sparkglm::cuda
