#pragma once
// KDA (gated delta rule with per-channel decay), MODEL.md section 3, on the device. H heads,
// K = V = 128 (or 32, tinyglm-micro). A batch is B sequences of n consecutive rows each (decode: n
// = 1; prefill: B = 1), rows seq-major: row b*n + t. All activations FP32; the per-sequence state
// stays FP32.
//
// The recurrence runs token by token (the CPU's kda_recurrent_run, per column of S): each thread
// owns 16 keys of one value column, so the read S^T k and the query S^T q reduce over 8 lanes in a
// fixed order. Decode rows run it; prefill takes the chunked WY form (kda_chunked.h), which is
// faster from 77 rows on the H200 (docs/cuda-operators.md).
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

// K = V. The kernels are templates over it with two instantiations, chosen at run time from
// KdaBatch::head_dim: production's 128 and tinyglm-micro's 32 (any other is refused).
inline constexpr int kKdaHeadDim = 128;
inline constexpr int kKdaMicroHeadDim = 32;
inline constexpr int kKdaTaps = 4;

// Per-sequence state (conv history, recurrent S) lives in slots of a pool: sequence b uses slot
// slots[b], so a decode batch needs no gather/scatter of states. Slots of one batch must differ.
struct KdaBatch {
  int num_seqs = 0;                // B
  int rows_per_seq = 0;            // n
  int heads = 0;                   // H
  const int32_t* slots = nullptr;  // [B] on the device: sequence b's state slot; null: slot b
  int head_dim = kKdaHeadDim;      // K = V: kKdaHeadDim or kKdaMicroHeadDim
  // A verify step's slices (speculative decoding, kda_verify_slices): sequence b's rows are
  // rows[first[b] .. first[b + 1]) (at most n of them, in position order), device words; null:
  // rows b*n + t.
  const int32_t* slice_rows = nullptr;
  const int32_t* slice_first = nullptr;
};

// The KDA state records a verify step keeps (one layer's pools; KdaStatePool's record_state and
// record_conv on the device), read per step row:
// after[row] >= 0 keeps the state and conv history after that row in that record, before[row] >= 0
// keeps those just before it in record 0.
struct KdaRowRecords {
  const int32_t* after = nullptr;
  const int32_t* before = nullptr;
  float* record_state = nullptr;  // [slots][records][H * K * V]
  float* record_conv = nullptr;   // [slots][records][3][taps - 1][H * K]
  int records = 0;
};

// Short conv + SiLU + l2norm (q also / sqrt(K)), gates and beta, MODEL.md section 3.
// raw_q, raw_k, raw_v: [B*n, H*K] projections, rows raw_stride floats apart (0: H*K; the runner
// keeps the three as one [B*n, 3*H*K] product); f: [B*n, H*K] (f = W_fb W_fa x); b_logit: [B*n, H];
// conv_w: [3][H*K, taps] (q, k, v); conv_hist: [num_slots][3][taps-1][H*K] (sequence b at slot
// slots[b]), read here and advanced by kda_advance_conv_history, which must therefore run after
// this kernel; a_log: [H]; dt_bias: [H*K].
// Outputs q, k, v: [B*n, H*K]; decay: [B*n, H*K] = e^g; beta: [B*n, H].
struct KdaPrepareArgs {
  const float* raw_q;
  const float* raw_k;
  const float* raw_v;
  const float* f;
  const float* b_logit;
  const float* conv_w;
  const float* conv_hist;
  const float* a_log;
  const float* dt_bias;
  float gate_lower_bound;
  float* q;
  float* k;
  float* v;
  float* decay;
  float* beta;
  int64_t raw_stride = 0;  // last, so positional initialisers of the rest keep working
};
void kda_prepare(const KdaBatch& batch, const KdaPrepareArgs& args, cudaStream_t stream);

// conv_hist[slot b] <- the last taps-1 raw inputs of [conv_hist[slot b]; raw rows of sequence b].
void kda_advance_conv_history(const KdaBatch& batch, const float* raw_q, const float* raw_k,
                              const float* raw_v, float* conv_hist, cudaStream_t stream,
                              int64_t raw_stride = 0);

// Per row and head: S = diag(decay) S; S += beta k (v - S^T k)^T; o = S^T q. At K = 32 one
// tiling serves every rows_per_seq (prefill runs here too: kda_chunked.h is K = 128 only).
// q, k, v, decay, o: [B*n, H*K]; beta: [B*n, H]; state: [num_slots, H, K, V] (S[i][j], i over
// keys), sequence b at slot slots[b].
void kda_recurrent(const KdaBatch& batch, const float* q, const float* k, const float* v,
                   const float* decay, const float* beta, float* state, float* o,
                   cudaStream_t stream);

// The decode rows of a verify step, slice by slice in one launch each instead of one set of
// launches per wave (step_layout.h): the prepare, the conv history's advance and the token-by-token
// recurrence of kda_prepare / kda_advance_conv_history / kda_recurrent over `batch`'s slices
// (slice_rows / slice_first; rows_per_seq the longest), each row computing the bits it computes
// as a one-row decode row (the decode tiling at every K), with the state records of `records` kept
// inside the kernels. The caller's rows of one slice share a slot and are in position order;
// conv_hist is args.conv_hist, which this call advances.
void kda_verify_slices(const KdaBatch& batch, const KdaPrepareArgs& args, float* conv_hist,
                       float* state, float* o, const KdaRowRecords& records, cudaStream_t stream);

// out = RMSNorm_per_head(o; o_norm, eps) * sigmoid(gate). o, gate, out: [B*n, H*V] FP32;
// out_bf16 (may be null): the same as BF16 bits for W_o.
void kda_output_gate(const KdaBatch& batch, const float* o, const float* gate, const float* o_norm,
                     float eps, float* out, uint16_t* out_bf16, cudaStream_t stream);

}  // namespace sparkglm::cuda
