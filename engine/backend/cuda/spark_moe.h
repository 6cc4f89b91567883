#pragma once
// The MoE experts of --precision-mode spark on the device (MODEL.md section 7,
// engine/model/precision_mode.h; cpu/moe_layer.cpp + cpu/mlp.cpp with fp4_activations set), for
// up to kQuantGemvMaxRows tokens (decode and prefill rows alike, in pieces):
//
//   1. group the (token, rank) pairs by expert (moe_decode_group);
//   2. xq[pair] = the token's FP32 input x rounded through NVFP4 with its expert's gate/up global
//      scale s_gu (fp4_activation.h): q = e2m1 * e4m3, exact in BF16;
//   3. g, u = s_gu * (W_gate q), s_gu * (W_up q): moe_decode_down's MMA kernels (BF16 or
//      quantized weights; MMA operands exact, FP32 accumulate, NVFP4 weights' global scale after
//      the sum);
//   4. h = SwiGLU(g, u) with the clamp, in FP32, rounded through NVFP4 with s_down: hq exact in
//      BF16;
//   5. y = s_down * (W_down hq), then the combine (ranks in order, the shared expert last).
// The shared expert (converted to NVFP4 by spark) reads the BF16 x through quantized_gemv, as in
// strict: the CPU does not round its activations.
//
// What this computes, against the CPU reference: the same FP4 codes wherever the inputs of the
// rounding agree (the rounding itself is the CPU's bit for bit); every product of an activation
// and a weight is exact in FP32 on both sides (q has 6 significant bits, a weight element at most
// 8), so the sums differ only in accumulation order and in where the global scales multiply (once
// after the sum here and on GB10's FP4 tensor cores, per element on the CPU): about 2^-24
// relative per sum. That can move an FP4 code across a rounding boundary now and then (a code
// step is 1/4 to 1/2 of a value), which is what the end-to-end tolerance covers.
//
// Every step is per pair or per token with the k order fixed (moe_experts.h), so a token's bits
// do not depend on the tokens beside it; no host synchronisation (graph-capturable). Weight
// streaming is per group of 8 pairs, so prefill through it is slower than strict's grouped
// GEMMs: an emulation on sm_90, not the sm_121 path (fp4_mma_experts_sm121.cu).
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/moe_experts.h"
#include "engine/backend/cuda/moe_quant_experts.h"
#include "engine/model/weights.h"

namespace sparkglm::cuda {

struct SparkMoeArgs {
  // As for moe_experts_decode, tokens <= 32: a.x [T, D] BF16 is the shared expert's input; a.h
  // [T * k, W] holds hq; a.gate_up / a.down are the BF16 routed experts when `quant` is null;
  // a.shared_gate_up / a.shared_down are not read (the shared expert comes from `shared_*`).
  MoeExpertArgs a;
  const MoeQuantExperts* quant = nullptr;  // quantized routed experts, or null
  const float* x_f32 = nullptr;            // [T, D] FP32: what the routed inputs are rounded from
  const float* scales = nullptr;           // [2 * E] device: s_gu of each expert, then s_down
  const Linear* shared_gate = nullptr;     // [W_s, D] or null: no shared expert
  const Linear* shared_up = nullptr;       // [W_s, D]
  const Linear* shared_down = nullptr;     // [D, W_s]
  uint16_t* xq = nullptr;                  // workspace [T * k, D] BF16
  float* gu = nullptr;                     // workspace [T * k, 2W] FP32
};

// Bad shapes or missing workspaces are an Error(kInvalidArgument).
void moe_experts_spark(const SparkMoeArgs& args, cudaStream_t stream);

}  // namespace sparkglm::cuda
