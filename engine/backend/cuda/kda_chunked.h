#pragma once
// KDA prefill in the chunked WY form (cpu::kda_chunked_run, MODEL.md section 3) on the device.
// Chunks of 64 positions start at absolute positions that are multiples of 64, as on the CPU, so
// a prefill resumed at any position runs the same chunks as a cold one.
//
// kda_chunked_prefill is one kernel (kda_chunked.cu): a block per (sequence, head, 64 value
// columns) walks the chunks in order with its slice of S in registers, and per
// chunk forms the gated Gram matrices, u = (I + A)^{-1} (v - (e^G k) S) by forward substitution,
// o = (e^G q) S + B u and S = diag(e^{G_C}) S + (beta k e^{G_C - G})^T u, all in shared memory.
// Every product runs on tensor cores as TF32 mma with FP32 accumulation (the inputs round to 10
// mantissa bits, hence the looser tolerance than the token-by-token kernel's); the substitution
// and the state stay FP32. It needs no workspace.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/kda.h"

namespace sparkglm::cuda {

inline constexpr int kKdaChunkLen = 64;  // = cpu::kKdaChunk

// The engine's KDA prefill, as on the CPU (cpu::KdaPath::kAuto): every prompt piece of a step,
// whatever its length, runs this kernel; decode rows run kda_recurrent.
// The same contract as kda_recurrent (q, k, v, decay = e^g, o: [B*n, H*K]; beta: [B*n, H];
// state: [num_slots, H, K, V], sequence b at slot batch.slots[b]), for B sequences whose row 0
// sits at absolute position start_position. Any start and length; head_dim kKdaHeadDim only.
void kda_chunked_prefill(const KdaBatch& batch, int64_t start_position, const float* q,
                         const float* k, const float* v, const float* decay, const float* beta,
                         float* state, float* o, cudaStream_t stream);

}  // namespace sparkglm::cuda
