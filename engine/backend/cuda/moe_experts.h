#pragma once
// MoE experts for decode batches (MODEL.md section 5): every (token, rank) pair runs its routed
// expert's SwiGLU with the clamp; the shared expert runs once for all tokens through gemv_bf16;
// the combine adds them per token in rank order, the shared expert last (cpu::moe_forward's
// order). The pairs are first grouped by expert on the device, up to 8 per group: a group streams
// its expert's weights once on tensor cores (mma.m16n8k16, BF16 in, FP32 accumulate), its pairs'
// inputs as the MMA's 8 columns (h = SwiGLU(g, u) enters the down projection as BF16). An MMA
// output column depends only on its own input column and the k order is fixed, so a token's
// result is bitwise the same whichever tokens share its group or batch. The launch shapes depend
// only on the number of tokens (groups past the count exit at once), so the step can be captured
// in a CUDA graph.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/stream_branch.h"

namespace sparkglm::cuda {

struct MoeExpertArgs {
  int64_t tokens = 0;                        // T (decode rows)
  int top_k = 0;                             // k routed experts per token
  int n_experts = 0;                         // E (at most 1024)
  int64_t hidden = 0;                        // D (a multiple of 512; of 32 for the narrow path)
  int64_t width = 0;                         // W, the expert width (likewise)
  float clamp_limit = 0;                     // swiglu_limit (<= 0: no clamp)
  const uint16_t* x = nullptr;               // [T, D] BF16
  const int32_t* experts = nullptr;          // [T, k] routed choices (-1: empty slot)
  const float* weights = nullptr;            // [T, k]
  const uint16_t* const* gate_up = nullptr;  // [E] device pointers to [2W, D]: gate rows, then up
  const uint16_t* const* down = nullptr;     // [E] device pointers to [D, W]
  const uint16_t* shared_gate_up = nullptr;  // [2W, D] or null: no shared expert
  const uint16_t* shared_down = nullptr;     // [D, W]
  uint16_t* h = nullptr;                     // workspace [T * k, W] BF16
  float* y = nullptr;                        // workspace [T * k, D] FP32
  int32_t* groups = nullptr;                 // workspace moe_decode_group_ints(T, k) int32
  float* shared_gu = nullptr;                // workspace [T, 2W] FP32 (with a shared expert)
  uint16_t* shared_h = nullptr;              // workspace [T, W] BF16
  float* shared_y = nullptr;                 // workspace [T, D] FP32
  float* out = nullptr;                      // [T, D]
  cudaEvent_t shared_done = nullptr;         // set: it ran beside (moe_shared_expert_beside)
};

// Int32 words of the `groups` workspace: a count, then per group its expert and 8 pairs.
int64_t moe_decode_group_ints(int64_t tokens, int top_k);

void moe_experts_decode(const MoeExpertArgs& args, cudaStream_t stream);

// The shared expert beside the routed ones: on `side`, forked from the work queued on `stream` so
// far, the shared expert's three launches (the kernels and workspaces moe_experts_decode gives
// it: shared_gu, shared_h, shared_y, which nothing else touches), then the branch closed.
// moe_experts_decode with args.shared_done = side.closed() waits for it before the combine instead
// of running the shared expert itself: the same kernels on the same inputs, so the same bits, off
// the step's serial path (its router, grouping and routed experts run meanwhile). Call it once x
// is written; in a captured step the two streams become two branches of the graph.
void moe_shared_expert_beside(const MoeExpertArgs& args, cudaStream_t stream,
                              const StreamBranch& side);

// The first and last steps of moe_experts_decode, for the quantized variant
// (moe_quant_experts.h), which shares them: the grouping of the pairs into `groups`, and the
// combine of y (and shared_y when shared_gate_up is not null) into out.
void moe_decode_group(const MoeExpertArgs& args, cudaStream_t stream);
void moe_decode_combine(const MoeExpertArgs& args, cudaStream_t stream);

// The down step alone over groups already built: y[pair] = down[e] h[pair] for every grouped pair,
// down[e] [hidden, width] BF16, h [T * k, width] BF16, y [T * k, hidden] FP32 (width a multiple of
// 32, hidden of 16). Spark (spark_moe.h) runs its gate/up products through it as well.
void moe_decode_down(const MoeExpertArgs& args, cudaStream_t stream);

}  // namespace sparkglm::cuda
