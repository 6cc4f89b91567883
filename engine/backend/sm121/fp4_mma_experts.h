#pragma once
// Spark's routed-expert products on GB10 (sm_121a): both operands NVFP4 on the Blackwell
// block-scaled FP4 tensor cores (mma.sync m16n8k64 kind::mxf4nvf4, E2M1 x E2M1 with one UE4M3
// scale per 16 k on each side, FP32 accumulate), the two global scales multiplied once after the
// sum: what the H200 emulates in spark_moe.h with BF16 operands holding the same exact values.
// Built only for sm_121a (CMake option SPARKGLM_CUDA_SM121, target sparkglm_sm121_fp4); the sm_90
// library never contains it.
//
// The activation side is packed from the same block rule as fp4_activation.h (fp4_rounding.cuh),
// so a row's codes are the CPU's round_trip_nvfp4 codes. This path is compiled, not yet run: its
// fragment and scale-lane mapping (below, in the .cu) must be checked on a GB10 against
// moe_experts_spark before a runner takes it.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::sm121 {

// A grouped product over decode pairs: groups as moe_decode_group writes them (a count, then per
// group its expert and up to 8 pairs, -1 unused). For expert e: w_packed[e] E2M1 [rows, k/2] (low
// nibble = even k), w_scale[e] E4M3 [rows, k/16], w_global[e]; activations x_packed [pairs, k/2],
// x_scale E4M3 [pairs, k/16] and the expert's activation global scale x_global[e].
struct Fp4ExpertProduct {
  int64_t rows = 0, k = 0;  // k a multiple of 64, rows of 16
  const int32_t* groups = nullptr;
  const uint8_t* const* w_packed = nullptr;
  const uint8_t* const* w_scale = nullptr;
  const float* w_global = nullptr;  // [E]
  const uint8_t* x_packed = nullptr;
  const uint8_t* x_scale = nullptr;
  const float* x_global = nullptr;  // [E]
  float* y = nullptr;               // [pairs, rows]
};

// FP32 rows x [rows, n] (n a multiple of 16) into NVFP4 with per-row global scales scale_2
// [rows] (device): packed [rows, n/2], scale E4M3 [rows, n/16].
void fp4_pack_rows(const float* x, int64_t rows, int64_t n, const float* scale_2, uint8_t* packed,
                   uint8_t* scale, cudaStream_t stream);

// y[pair] = w_global[e] * x_global[e] * (W[e] q[pair]) for every grouped pair; max_groups the
// grid's group dimension (pairs of the step).
void fp4_expert_product(const Fp4ExpertProduct& p, unsigned max_groups, cudaStream_t stream);

}  // namespace sparkglm::sm121
