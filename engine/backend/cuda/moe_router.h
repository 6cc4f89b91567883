#pragma once
// The MoE router's expert choice on the device, cpu::select_experts' contract (MODEL.md section 5):
//   s = sigmoid(logits); chosen = top-k of s + bias (equal values: lower expert first; NaN never
//   chosen, empty slots {-1, 0}); weight = s / sum_chosen s (summed in rank order) * scale.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

inline constexpr int kRouterMaxExperts = 1024;
inline constexpr int kRouterMaxTopK = 16;

// logits: [rows, experts] FP32; bias: [experts] or null; experts_out: [rows, top_k];
// weights_out: [rows, top_k].
void route_experts(const float* logits, const float* bias, int64_t rows, int experts, int top_k,
                   bool norm_topk_prob, float routed_scaling_factor, int32_t* experts_out,
                   float* weights_out, cudaStream_t stream);

}  // namespace sparkglm::cuda
