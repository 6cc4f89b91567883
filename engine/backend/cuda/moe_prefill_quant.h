#pragma once
// The grouped GEMMs of moe_experts_prefill over quantized experts (moe_quant_experts.h). The
// grouped GEMMs read BF16 weights, so the routed experts are dequantized `chunk` at a time into a
// bounded BF16 scratch, each weight the CPU's FP32 dequantization (weight_formats.h) rounded once
// to BF16, and each chunk's groups then run through grouped_gemm_swiglu and grouped_gemm into the
// same h and y rows as the BF16 path; the shared expert follows as one more group. An expert with
// no rows this step is not dequantized (its kernel reads the count on the device and exits), so
// nothing travels to the host. Eager: five launches per chunk, not meant for graph capture.
//
// Error against the CPU reference over the dequantized FP32 weights: besides the BF16 h of the
// BF16 path, every weight carries one BF16 rounding (relative error <= 2^-9).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/moe_quant_experts.h"

namespace sparkglm::cuda {

// What moe_experts_prefill hands over once its pairs are grouped (moe_prefill.cu's workspace).
struct MoePrefillQuantGemms {
  int n_experts = 0;                      // E
  int64_t hidden = 0, width = 0;          // D, W
  float clamp_limit = 0;                  // swiglu_limit (<= 0: no clamp)
  int tile_rows = 128;                    // grouped_gemm's row tile
  int64_t pairs = 0;                      // T * k: bounds the routed rows
  int32_t shared_rows = 0;                // T with a shared expert, else 0
  const uint16_t* x = nullptr;            // [T, D] BF16
  const int32_t* counts = nullptr;        // [E] device: rows of each expert
  const int32_t* offsets = nullptr;       // [E + 2] device: first grouped row of each group
  const int32_t* token_of_row = nullptr;  // [rows] device
  uint16_t* h = nullptr;                  // [rows, W] BF16
  float* y = nullptr;                     // [rows, D] FP32
};

// The experts a prefill step dequantizes at once (the runner's scratch: 4 * 3 * W * D * 2 bytes,
// 200 MB at glm-5.3-flash shapes).
inline constexpr int kMoePrefillQuantChunk = 4;

// Scratch bytes for `chunk` experts at once: their BF16 gate_up [2W, D] and down [D, W], with a
// few hundred bytes of tables (the shared expert reuses the first slot).
size_t moe_prefill_quant_scratch_bytes(int chunk, int64_t hidden, int64_t width);

// scratch: moe_prefill_quant_scratch_bytes(chunk, D, W) bytes, 256-byte aligned; chunk >= 1.
void moe_prefill_quant_gemms(const MoePrefillQuantGemms& g, const MoeQuantExperts& q, void* scratch,
                             int chunk, cudaStream_t stream);

}  // namespace sparkglm::cuda
