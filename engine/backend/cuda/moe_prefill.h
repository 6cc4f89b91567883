#pragma once
// MoE experts for prefill chunks (MODEL.md section 5), in cpu::moe_forward's shape: the (token,
// rank) pairs are grouped by expert on the device (token order within an expert, as the CPU
// does) with the shared expert's T rows as one more group, then two grouped GEMMs
// (grouped_gemm.h) cover every group at once: gate_up with the clamped SwiGLU in its epilogue,
// then down; the combine adds each token's ranks in order with the shared expert last. The group
// sizes stay on the device: no host synchronisation, six launches whatever the routing.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/moe_quant_experts.h"

namespace sparkglm::cuda {

struct MoePrefillArgs {
  int64_t tokens = 0;                    // T
  int top_k = 0;                         // k
  int n_experts = 0;                     // E
  int64_t hidden = 0;                    // D (a multiple of 8)
  int64_t width = 0;                     // W, the expert width (a multiple of 8)
  float clamp_limit = 0;                 // swiglu_limit (<= 0: no clamp)
  const uint16_t* x = nullptr;           // [T, D] BF16, 16-byte aligned
  const int32_t* experts = nullptr;      // [T, k] routed choices (-1 or >= E: empty slot)
  const float* weights = nullptr;        // [T, k]
  std::vector<const uint16_t*> gate_up;  // [E] device pointers to [2W, D]: gate rows, then up
  std::vector<const uint16_t*> down;     // [E] device pointers to [D, W]
  // The same pointers as device arrays ([E] each); when null the host lists above are copied to
  // the workspace on the stream (a pageable copy each call). Weights 16-byte aligned.
  const uint16_t* const* device_gate_up = nullptr;
  const uint16_t* const* device_down = nullptr;
  const uint16_t* shared_gate_up = nullptr;  // [2W, D] or null: no shared expert
  const uint16_t* shared_down = nullptr;     // [D, W]
  void* workspace = nullptr;                 // moe_prefill_workspace_bytes(), 256-byte aligned
  float* out = nullptr;                      // [T, D]
  // Quantized experts (moe_prefill_quant.h): when set, the weights come from `quant` (gate_up,
  // down, their device arrays and shared_gate_up / shared_down are not read) through a BF16
  // scratch of moe_prefill_quant_scratch_bytes(quant_chunk, D, W) bytes.
  const MoeQuantExperts* quant = nullptr;
  void* quant_scratch = nullptr;
  int quant_chunk = 0;
};

size_t moe_prefill_workspace_bytes(int64_t tokens, int top_k, int n_experts, int64_t hidden,
                                   int64_t width);

// Stream-ordered, no host synchronisation; throws Error(kInvalidArgument) on bad shapes. `gemm` is
// no longer used (kept so that callers need not change).
void moe_experts_prefill(const MoePrefillArgs& args, Gemm& gemm, cudaStream_t stream);

}  // namespace sparkglm::cuda
