#pragma once
// KDA prefill in the chunked WY form (cpu::kda_chunked_run, MODEL.md section 3) on the device.
// Chunks of 64 positions start at absolute positions that are multiples of 64, as on the CPU, so
// a prefill resumed at any position runs the same chunks as a cold one.
//
// Two kernels. The first is parallel over (sequence, head, chunk) and needs no state: the
// cumulative log decays G, the gated Gram matrices A (keys x keys, beta folded in) and B (queries x
// keys), T = (I + A)^{-1} by forward substitution, W = T (e^G * k), U = T v, e^G * q and the
// end-of-chunk key factors beta k e^{G_C - G}, written to a workspace. The second walks the chunks
// of one (sequence, head, 64 value columns) in order with its slice of the FP32 state in shared
// memory: u = U - W S, o = (e^G q) S + B u, S = diag(e^{G_C}) S + (beta k e^{G_C-G})^T u.
// Every product runs on tensor cores as TF32 mma with FP32 accumulation (the inputs round to 10
// mantissa bits, hence the looser tolerance than the token-by-token kernel's).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/kda.h"

namespace sparkglm::cuda {

inline constexpr int kKdaChunkLen = 64;  // = cpu::kKdaChunk

// Below this many rows per sequence the token-by-token kernel (kda_recurrent) is the faster
// prefill, chosen from the G1 timings (docs/cuda-operators.md). On the H200 this chunked kernel
// is still slower at every G1 length (6.38 ms against 5.99 ms at 8192 rows, 157 against 65 us at
// 77), so kda_prefill never selects it yet.
inline constexpr int kKdaChunkedMinRows = 1 << 30;

// Bytes of workspace kda_chunked_prefill needs for this batch and start position.
size_t kda_chunked_workspace_bytes(const KdaBatch& batch, int64_t start_position);

// The same contract as kda_recurrent (q, k, v, decay = e^g, o: [B*n, H*K]; beta: [B*n, H];
// state: [num_slots, H, K, V], sequence b at slot batch.slots[b]), for B sequences whose row 0
// sits at absolute position start_position. workspace: kda_chunked_workspace_bytes bytes of
// device memory.
void kda_chunked_prefill(const KdaBatch& batch, int64_t start_position, const float* q,
                         const float* k, const float* v, const float* decay, const float* beta,
                         float* state, float* o, void* workspace, cudaStream_t stream);

// The two halves of kda_chunked_prefill, run in this order (the G1 bench times them apart):
// the state-free per-chunk terms into the workspace, then the scan over the chunks that reads
// them and updates state and o. Same arguments and workspace as kda_chunked_prefill.
void kda_chunked_prepare(const KdaBatch& batch, int64_t start_position, const float* q,
                         const float* k, const float* v, const float* decay, const float* beta,
                         void* workspace, cudaStream_t stream);
void kda_chunked_scan(const KdaBatch& batch, int64_t start_position, float* state, float* o,
                      const void* workspace, cudaStream_t stream);

// The prefill the engine should run: kda_chunked_prefill from kKdaChunkedMinRows rows per
// sequence, kda_recurrent below (workspace may then be null; today it always is).
void kda_prefill(const KdaBatch& batch, int64_t start_position, const float* q, const float* k,
                 const float* v, const float* decay, const float* beta, float* state, float* o,
                 void* workspace, cudaStream_t stream);

}  // namespace sparkglm::cuda
