#pragma once
// The two per-head products around MLA's absorbed attention (MODEL.md section 4), with kv_b_proj
// as BF16 [H*(dn+dv), R]: per head h, rows h*(dn+dv) .. +dn are W_kb,h [dn, R], the next dv rows
// W_vb,h [dv, R].
//
// Both follow the CPU reference's reduction order exactly (cpu/mla_layer.cpp): q~ is one FMA
// chain over d in increasing order per element (absorb_queries), o is cpu::linear's 8-lane order
// over e (lane_linear.cuh). So the results equal the CPU bit for bit and a row's result never
// depends on the batch, for any T. Both are CUDA-core FP32 kernels that stage W tiles in shared
// memory: decode (T <= 32) reads each weight once per call; prefill tiles 64 rows per W tile.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// q_tilde[t][h][e] = sum_{d<dn} q[t][h*dn + d] * W_kb,h[d][e].  q: [T, H*dn]; q_tilde: [T, H, R].
// R must be a multiple of 64 and dn of 4.
void mla_absorb_queries(const float* q, int64_t T, int H, int dn, int dv, int R,
                        const uint16_t* kv_b, float* q_tilde, cudaStream_t stream);

// o[t][h*dv + j] = sum_{e<R} o_bar[t][h][e] * W_vb,h[j][e].  o_bar: [T, H, R]; o: [T, H*dv] FP32;
// o_bf16: the same as BF16 bits (round to nearest even) for W_o, or null. R must be a multiple
// of 8.
void mla_up_values(const float* o_bar, int64_t T, int H, int dn, int dv, int R,
                   const uint16_t* kv_b, float* o, uint16_t* o_bf16, cudaStream_t stream);

}  // namespace sparkglm::cuda
