#pragma once
// y = x W^T for every dense projection of the CUDA runner, whatever format W is kept in
// (engine/model/weights.h's Linear): the one dispatch the KDA, MLA, dense-MLP, MTP and LM-head
// call sites share. x: [m, W.cols] BF16 bits; y: [m, W.rows] FP32.
//
//   BF16        Gemm: decode rows through gemv_bf16, prefill rows through the fixed-tile GEMM.
//   quantized   decode rows: quantized_gemv in pieces of kQuantGemvMaxRows (the weight streams
//               in its format, dequantized in registers to the CPU's exact FP32 values);
//               prefill rows: W dequantized into the BF16 workspace (each value exactly as
//               weight_formats.h computes it in FP32, then rounded to nearest-even BF16), then
//               Gemm::prefill.
// Error against the CPU reference (dequantize_linear's FP32 weights, FP32 activations): decode
// rows differ only by x's rounding to BF16 (as on the BF16 path) and the summation order;
// prefill rows add one BF16 rounding of each weight, |dw| <= 2^-9 |w|, the same relative size as
// the activation's rounding. The choice of path depends on what a row is (decode or prefill),
// never on how many rows share the step, so batch invariance holds as in gemm.h.
//
// Fused operands: one product over several Linears stored back to back (KDA's q/k/v, the dense
// MLP's gate/up) takes fused(...), which checks that the parts' elements and scales are
// contiguous in one format (and, for NVFP4, one global scale) and describes them as one Linear.
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/quantized_linear.h"
#include "engine/model/weights.h"

namespace sparkglm::cuda {

// The BF16 scratch a prefill product dequantizes its weight into: [elems] (DeviceWeights owns
// it, sized for the largest quantized projection the runner takes through project_*).
struct DequantWorkspace {
  uint16_t* data = nullptr;
  int64_t elems = 0;
};

// The Linear as quantized_gemv's operand; a dense one is an Error(kInvalidArgument) naming its
// shape.
QuantizedWeight quantized_weight(const Linear& w);

// Parts [r_i, cols] stored back to back as one [sum r_i, cols] Linear. Parts of different
// formats, columns or global scales, or not contiguous in data and scales (FP8 block parts
// before the last need rows % 128 == 0), are an Error(kUnsupported) naming `what`.
Linear fused(std::initializer_list<const Linear*> parts, const char* what);

// Rows [0, decode_rows) as decode rows, rows [decode_rows, m) as prefill rows (Gemm::step).
void project_step(Gemm& gemm, const DequantWorkspace& ws, const Linear& w, const uint16_t* x,
                  int64_t decode_rows, int64_t m, float* y, cudaStream_t stream);
void project_decode(Gemm& gemm, const Linear& w, const uint16_t* x, int64_t m, float* y,
                    cudaStream_t stream);
void project_prefill(Gemm& gemm, const DequantWorkspace& ws, const Linear& w, const uint16_t* x,
                     int64_t m, float* y, cudaStream_t stream);

// One of several products of the same rows: y = x W^T.
struct ProjectionPart {
  const Linear* w = nullptr;
  const uint16_t* x = nullptr;
  float* y = nullptr;
};
// project_step (project_decode) of each part, the same bits, with the BF16 parts' decode rows in
// one Gemm::decode_group: tinyglm-micro's small products of one input (MLA's latent, index key,
// pooling gate and query projections; KDA's q/k/v, gate factors and beta) in one launch each.
// At most kGemvGroupMax parts.
void project_step_group(Gemm& gemm, const DequantWorkspace& ws,
                        std::initializer_list<ProjectionPart> parts, int64_t decode_rows, int64_t m,
                        cudaStream_t stream);
void project_decode_group(Gemm& gemm, std::initializer_list<ProjectionPart> parts, int64_t m,
                          cudaStream_t stream);

// out: [w.rows, w.cols] BF16 bits, each weight weight_formats.h's FP32 value rounded to nearest
// even. w must be quantized.
void dequantize_to_bf16(const Linear& w, uint16_t* out, cudaStream_t stream);

}  // namespace sparkglm::cuda
