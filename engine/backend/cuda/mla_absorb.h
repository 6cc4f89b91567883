#pragma once
// The two per-head products around MLA's absorbed attention (MODEL.md section 4), with kv_b_proj
// as BF16 [H*(dn+dv), R]: per head h, rows h*(dn+dv) .. +dn are W_kb,h [dn, R], the next dv rows
// W_vb,h [dv, R].
//
// Two paths. The CUDA-core FP32 kernels (mla_absorb_queries, mla_up_values) follow the CPU
// reference's reduction order exactly (cpu/mla_layer.cpp): q~ is one FMA chain over d in
// increasing order per element (absorb_queries), o is cpu::linear's 8-lane order over e
// (lane_linear.cuh). So their results equal the CPU bit for bit and a row's result never depends
// on the batch, for any T. They stage W tiles in shared memory: decode (T <= 32) reads each weight
// once per call; prefill tiles 64 rows per W tile.
// The *_tc functions run the same products on tensor cores, one strided-batched cuBLAS GEMM over
// the heads, after rounding the FP32 operand (q, ō) to BF16: within tolerance of the kernels, with
// no batch-invariance promise (like Gemm::linear past kGemvMaxRows). The runner takes them for
// passes of more than kGemvMaxRows rows, so the bit-for-bit claim holds for passes of <= 32 rows.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

class Gemm;

// q_tilde[t][h][e] = sum_{d<dn} q[t][h*dn + d] * W_kb,h[d][e].  q: [T, H*dn]; q_tilde: [T, H, R].
// R must be a multiple of 64 and dn of 4.
void mla_absorb_queries(const float* q, int64_t T, int H, int dn, int dv, int R,
                        const uint16_t* kv_b, float* q_tilde, cudaStream_t stream);

// o[t][h*dv + j] = sum_{e<R} o_bar[t][h][e] * W_vb,h[j][e].  o_bar: [T, H, R]; o: [T, H*dv] FP32;
// o_bf16: the same as BF16 bits (round to nearest even) for W_o, or null. R must be a multiple
// of 8.
void mla_up_values(const float* o_bar, int64_t T, int H, int dn, int dv, int R,
                   const uint16_t* kv_b, float* o, uint16_t* o_bf16, cudaStream_t stream);

// mla_absorb_queries on tensor cores. q_bf16: [T, H*dn] scratch for the BF16 copy of q.
void mla_absorb_queries_tc(const float* q, int64_t T, int H, int dn, int dv, int R,
                           const uint16_t* kv_b, uint16_t* q_bf16, float* q_tilde, Gemm& gemm,
                           cudaStream_t stream);

// mla_up_values on tensor cores, writing the BF16 o only (W_o's operand; FP32 accumulation,
// rounded to BF16 once by cuBLAS). o_bar_bf16: [T, H, R] scratch for the BF16 copy of ō.
void mla_up_values_tc(const float* o_bar, int64_t T, int H, int dn, int dv, int R,
                      const uint16_t* kv_b, uint16_t* o_bar_bf16, uint16_t* o_bf16, Gemm& gemm,
                      cudaStream_t stream);

}  // namespace sparkglm::cuda
