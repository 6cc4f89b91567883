#pragma once
// The routed-expert decode kernels of 2026-12-02 (moe_quant_baseline.cu), reached only through
// moe_experts_decode_quantized(..., QuantKernel::kBaseline): kept for one release so that one G1
// run times the old and the new kernels side by side (bench/cuda/g1_cases_moe_quant.cpp) on the
// same GPU. Both compute the same bits (the tests compare them); remove this file and the variant
// once an H200 session has recorded both.
#include <cuda_runtime.h>

#include "engine/backend/cuda/moe_quant_device.cuh"

namespace sparkglm::cuda::moe_quant {

// The gate/up then down launches over the `pairs` groups the grouping wrote.
void launch_routed_baseline(const QuantDecodeArgs& q, unsigned pairs, cudaStream_t stream);

}  // namespace sparkglm::cuda::moe_quant
