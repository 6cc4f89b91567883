#pragma once
// MoE experts for prefill chunks (MODEL.md section 5), in cpu::moe_forward's shape: the (token,
// rank) pairs are grouped by expert on the device (token order within an expert, as the CPU
// does), the gathered rows of each expert run as one GEMM per projection (Gemm::linear: the
// batch-invariant gemv_bf16 for <= 32 rows, cuBLASLt above), then the clamped SwiGLU, the down
// projection, the shared expert over all tokens, and the combine per token in rank order with the
// shared expert last. The group sizes come back to the host once per call (289 int32, one stream
// synchronisation) to size the per-expert GEMMs; a device-side grouped GEMM that reads them on
// the device would remove that round trip and the per-expert launches.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/backend/cuda/gemm.h"

namespace sparkglm::cuda {

struct MoePrefillArgs {
  int64_t tokens = 0;                        // T
  int top_k = 0;                             // k
  int n_experts = 0;                         // E
  int64_t hidden = 0;                        // D (a multiple of 8)
  int64_t width = 0;                         // W, the expert width (a multiple of 8)
  float clamp_limit = 0;                     // swiglu_limit (<= 0: no clamp)
  const uint16_t* x = nullptr;               // [T, D] BF16
  const int32_t* experts = nullptr;          // [T, k] routed choices (-1 or >= E: empty slot)
  const float* weights = nullptr;            // [T, k]
  std::vector<const uint16_t*> gate_up;      // [E] device pointers to [2W, D]: gate rows, then up
  std::vector<const uint16_t*> down;         // [E] device pointers to [D, W]
  const uint16_t* shared_gate_up = nullptr;  // [2W, D] or null: no shared expert
  const uint16_t* shared_down = nullptr;     // [D, W]
  void* workspace = nullptr;                 // moe_prefill_workspace_bytes(), 256-byte aligned
  float* out = nullptr;                      // [T, D]
};

size_t moe_prefill_workspace_bytes(int64_t tokens, int top_k, int n_experts, int64_t hidden,
                                   int64_t width);

// Synchronises `stream` once (the group sizes); throws Error(kInvalidArgument) on bad shapes.
void moe_experts_prefill(const MoePrefillArgs& args, Gemm& gemm, cudaStream_t stream);

}  // namespace sparkglm::cuda
