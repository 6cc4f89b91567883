#pragma once
// KDA prefill in the chunked WY form (cpu::kda_chunked_run, MODEL.md section 3) on the device.
// Chunks of 64 positions start at absolute positions that are multiples of 64, as on the CPU, so
// a prefill resumed at any position runs the same chunks as a cold one.
//
// kda_chunked_prefill is one kernel (kda_chunked.cu, namespace fused): a block per (sequence,
// head, 64 value columns) walks the chunks in order with its slice of S in registers, and per
// chunk forms the gated Gram matrices, u = (I + A)^{-1} (v - (e^G k) S) by forward substitution,
// o = (e^G q) S + B u and S = diag(e^{G_C}) S + (beta k e^{G_C - G})^T u, all in shared memory.
// Every product runs on tensor cores as TF32 mma with FP32 accumulation (the inputs round to 10
// mantissa bits, hence the looser tolerance than the token-by-token kernel's); the substitution
// and the state stay FP32. It needs no workspace.
//
// kda_chunked_prepare / kda_chunked_scan are the earlier two-kernel form (state-free per-chunk
// terms through an HBM workspace, then a scan), kept for the G1 split rows.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/kda.h"

namespace sparkglm::cuda {

inline constexpr int kKdaChunkLen = 64;  // = cpu::kKdaChunk

// Prefill calls of at least this many rows per sequence take the chunked kernel, one-row calls
// the token-by-token one (kda_recurrent), the CPU reference's rule (cpu/kda_layer.cpp): the two
// round differently, and a prompt's rows must not change path with how the scheduler's prefill
// budget cut it (pieces end on the 64-row chunk grid, so only a one-row last piece can differ,
// as on the CPU).
inline constexpr int kKdaChunkedMinRows = 2;

// Bytes of workspace the two-kernel form (kda_chunked_prepare / kda_chunked_scan) needs for this
// batch and start position; kda_chunked_prefill ignores its workspace argument (it may be null).
size_t kda_chunked_workspace_bytes(const KdaBatch& batch, int64_t start_position);

// The same contract as kda_recurrent (q, k, v, decay = e^g, o: [B*n, H*K]; beta: [B*n, H];
// state: [num_slots, H, K, V], sequence b at slot batch.slots[b]), for B sequences whose row 0
// sits at absolute position start_position. Any start and length. workspace: unused.
void kda_chunked_prefill(const KdaBatch& batch, int64_t start_position, const float* q,
                         const float* k, const float* v, const float* decay, const float* beta,
                         float* state, float* o, void* workspace, cudaStream_t stream);

// The two-kernel form, run in this order: the state-free per-chunk terms into the workspace
// (kda_chunked_workspace_bytes), then the scan over the chunks that reads them and updates state
// and o. Same results as kda_chunked_prefill up to rounding; slower (G1 split rows).
void kda_chunked_prepare(const KdaBatch& batch, int64_t start_position, const float* q,
                         const float* k, const float* v, const float* decay, const float* beta,
                         void* workspace, cudaStream_t stream);
void kda_chunked_scan(const KdaBatch& batch, int64_t start_position, float* state, float* o,
                      const void* workspace, cudaStream_t stream);

// The prefill the engine should run: kda_chunked_prefill from kKdaChunkedMinRows rows per
// sequence, kda_recurrent below. workspace may be null.
void kda_prefill(const KdaBatch& batch, int64_t start_position, const float* q, const float* k,
                 const float* v, const float* decay, const float* beta, float* state, float* o,
                 void* workspace, cudaStream_t stream);

}  // namespace sparkglm::cuda
