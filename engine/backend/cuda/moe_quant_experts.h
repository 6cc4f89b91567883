#pragma once
// MoE experts for decode rows with the routed experts kept in an FP4-Local format (MODEL.md
// sections 5 and 7): moe_experts_decode's structure (same grouping of the pairs, same clamp, same
// combine order, graph-capturable), with each weight dequantized in registers.
//
// Routed experts, per operand (gate, up, down; each with its own per-expert scales):
//   NVFP4      the MMA's A operand is BF16(e2m1 * e4m3 block scale), exact (at most 6 significant
//              bits); the FP32 global scale (weight_scale_2) multiplies the FP32 dot product once
//   MXFP8      A = BF16(e4m3 * 2^(e - 127)), exact for E8M0 codes 3 .. 254 (a power of two times
//              4 significant bits, at least 2^-133); codes 0 .. 2 round once to nearest
//   FP8 block  A = BF16(e4m3), exact; each 128-k block's FP32 MMA partial is scaled by its
//              scale_inv and added to the accumulator (acc = fma(partial, scale_inv, acc))
// Every lane covers 32 consecutive k of each 128-k block (16 NVFP4 bytes or 32 E4M3 bytes per W
// row), in a fixed order that depends on k alone: as in the BF16 kernel an MMA output column
// depends only on its own input column, so a token's result is bitwise the same whichever tokens
// share its group or batch. Gate and up are two operands (their global scales differ); h =
// SwiGLU(g, u) enters the down projection as BF16.
//
// Cost (bf16_pairs.cuh): an NVFP4 byte becomes its BF16 pair by one lookup in a 32 KB shared table
// and one BF16x2 FMA by the block scale (about 2 instructions a weight, where the 2026-12-02
// kernel spent about 10 decoding each element in FP32); E4M3 bytes by bit moves and one BF16x2
// FMA. Gate and up stream through one pipeline (their x fragments loaded once), 2 steps ahead
// (down: 3 NVFP4, 2 8-bit; gate/up 8-bit: 1), at 3-4 blocks of 4 warps an SM. The sequence of
// MMAs per output is the 2026-12-02 kernel's, which stays reachable as QuantKernel::kBaseline for
// one release (moe_quant_baseline.h): the same bits (tested), except where the baseline truncated
// an MXFP8 product below BF16's range (E8M0 codes 0 .. 2) and for E4M3 NaN codes (read as +-480
// now, NaN then); no quantizer emits either.
//
// The shared expert runs once for all tokens through quantized_gemv (or gemv_bf16 for a dense
// BF16 Linear), gate and up as two products.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/moe_experts.h"
#include "engine/backend/cuda/quantized_linear.h"
#include "engine/model/weights.h"

namespace sparkglm::cuda {

// One projection of every routed expert of a layer: device arrays of E entries each. The arrays
// a format does not use may be null (scale for FP8 block, scale_inv for NVFP4 / MXFP8,
// global_scale for the 8-bit formats: 1).
struct MoeQuantOperand {
  QuantFormat format = QuantFormat::kNvfp4;
  const uint8_t* const* data = nullptr;     // [E] NVFP4 packed E2M1 [rows, cols/2]; else E4M3
  const uint8_t* const* scale = nullptr;    // [E] NVFP4 E4M3 [rows, cols/16]; MXFP8 E8M0
  const float* const* scale_inv = nullptr;  // [E] FP8 block [ceil(rows/128), ceil(cols/128)]
  const float* global_scale = nullptr;      // [E] NVFP4 weight_scale_2
};

// A layer's quantized experts: gate, up [W, D] and down [D, W] of every routed expert, and the
// shared expert's Linears (host descriptions of device data; null: no shared expert), which may
// be quantized or dense BF16.
struct MoeQuantExperts {
  MoeQuantOperand gate, up, down;
  const Linear* shared_gate = nullptr;
  const Linear* shared_up = nullptr;
  const Linear* shared_down = nullptr;
};

// args as for moe_experts_decode, except that gate_up / down / shared_gate_up / shared_down are
// not read (the weights come from `q`) and shared_gu holds the shared expert's gate products
// [T, W] then its up products [T, W]. hidden and width multiples of 512, tokens <= 32 with a
// shared expert (quantized_gemv's bound). Stream-ordered, no host synchronisation. `kernel`
// picks the routed and shared kernels' generation (quantized_linear.h; the engine's is kCurrent).
void moe_experts_decode_quantized(const MoeExpertArgs& args, const MoeQuantExperts& q,
                                  cudaStream_t stream, QuantKernel kernel = QuantKernel::kCurrent);

// moe_decode_down over quantized weights: y[pair] = gs[e] * (w[e] h[pair]) for every grouped
// pair, w's experts [hidden, width] (args.down is not read). An operand without the arrays of its
// format is an Error(kInvalidArgument).
void moe_decode_down_quantized(const MoeExpertArgs& args, const MoeQuantOperand& w,
                               cudaStream_t stream);

}  // namespace sparkglm::cuda
