#include "engine/backend/cuda/kda.h"

#include <cfloat>
#include <string>
#include <type_traits>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kHist = kKdaTaps - 1;
constexpr float kL2NormEps = 1e-6f;  // docs/checkpoint.md

// The pool slot holding sequence seq's conv history and state.
__device__ __forceinline__ int64_t slot_of(const KdaBatch& batch, int seq) {
  return batch.slots ? int64_t(batch.slots[seq]) : int64_t(seq);
}

// Sequence seq's rows: rows_per_seq consecutive ones, or with kSlices a verify slice's
// (KdaBatch::slice_rows). The kernels take kSlices as a template argument, so the decode and
// prefill launches run the code they ran before verify slices existed.
template <bool kSlices>
__device__ __forceinline__ int rows_of(const KdaBatch& batch, int seq) {
  if constexpr (kSlices) return batch.slice_first[seq + 1] - batch.slice_first[seq];
  return batch.rows_per_seq;
}
template <bool kSlices>
__device__ __forceinline__ int64_t row_of(const KdaBatch& batch, int seq, int t) {
  if constexpr (kSlices) return int64_t(batch.slice_rows[batch.slice_first[seq] + t]);
  return int64_t(seq) * batch.rows_per_seq + t;
}

// Every kernel is a template over K = V with two instantiations (kda.h): kKdaHeadDim and
// kKdaMicroHeadDim.

// Grid: (H, B*n); block: K threads, one channel each.
template <int kK, bool kSlices>
__global__ void __launch_bounds__(kK)
    prepare_kernel(const KdaBatch batch, const __grid_constant__ KdaPrepareArgs a) {
  __shared__ float scratch[32];
  pdl_wait();  // the projections' raw rows
  pdl_trigger();
  const int h = blockIdx.x, i = threadIdx.x;
  const int n = batch.rows_per_seq, seq = int(blockIdx.y) / n, t = int(blockIdx.y) % n;
  if (kSlices && t >= rows_of<kSlices>(batch, seq)) return;  // a slice shorter than n (the block)
  const int64_t row = row_of<kSlices>(batch, seq, t);
  const int64_t hk = int64_t(batch.heads) * kK;
  const int64_t c = int64_t(h) * kK + i;  // channel
  const float* raws[3] = {a.raw_q, a.raw_k, a.raw_v};
  const int64_t rs = a.raw_stride > 0 ? a.raw_stride : hk;
  float out[3];
#pragma unroll
  for (int part = 0; part < 3; ++part) {
    const float* w = a.conv_w + (part * hk + c) * kKdaTaps;
    const float* hist = a.conv_hist + (slot_of(batch, seq) * 3 + part) * kHist * hk;
    // Input p of the combined sequence [history; rows] is history row p for p < kHist.
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < kKdaTaps; ++j) {
      const int p = t + j;  // combined index of tap j for output t
      const float in = p < kHist ? hist[p * hk + c]
                                 : raws[part][row_of<kSlices>(batch, seq, p - kHist) * rs + c];
      acc = j == 0 ? w[0] * in : acc + w[j] * in;
    }
    out[part] = acc / (1.0f + expf(-acc));  // SiLU
  }
  const float q_ss = block_sum(out[0] * out[0], scratch);
  const float k_ss = block_sum(out[1] * out[1], scratch);
  const int64_t at = row * hk + c;
  a.q[at] = out[0] * (1.0f / sqrtf(q_ss + kL2NormEps)) / sqrtf(float(kK));
  a.k[at] = out[1] * (1.0f / sqrtf(k_ss + kL2NormEps));
  a.v[at] = out[2];
  // exp(A_log) is capped so an overflow cannot meet f + dt_bias == 0 as inf * 0.
  const float scale = fminf(expf(a.a_log[h]), FLT_MAX);
  const float g = a.gate_lower_bound * sigmoidf_dev(scale * (a.f[at] + a.dt_bias[c]));
  a.decay[at] = expf(g);
  if (i == 0) a.beta[row * batch.heads + h] = sigmoidf_dev(a.b_logit[row * batch.heads + h]);
}

// Grid: (H, B) (with kSlices (H, B, 3): one of q/k/v a block); block: K threads. The new history of
// each sequence from its old history and rows; with kSlices (a verify step), the history after (or
// before) each row that keeps a record in `records` is copied into that record first.
template <int kK, bool kSlices>
__global__ void advance_hist_kernel(const KdaBatch batch, const float* raw_q, const float* raw_k,
                                    const float* raw_v, int64_t rs, float* conv_hist,
                                    const KdaRowRecords records) {
  pdl_wait();
  pdl_trigger();
  const int64_t hk = int64_t(batch.heads) * kK;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int seq = blockIdx.y, n = rows_of<kSlices>(batch, seq);
  const int64_t slot = slot_of(batch, seq);
  const float* raws[3] = {raw_q, raw_k, raw_v};
  const int first_part = kSlices ? int(blockIdx.z) : 0, end_part = kSlices ? first_part + 1 : 3;
  for (int part = first_part; part < end_part; ++part) {
    float* hist = conv_hist + (slot * 3 + part) * kHist * hk;
    // Input p of the combined sequence [history; rows].
    auto input = [&](int p) {
      return p < kHist ? hist[p * hk + c]
                       : raws[part][row_of<kSlices>(batch, seq, p - kHist) * rs + c];
    };
    // The history just before row t is inputs t .. t + kHist - 1; just after it, t + 1 ...
    auto keep = [&](int record, int first) {
      float* to = records.record_conv + ((slot * records.records + record) * 3 + part) * kHist * hk;
      for (int p = 0; p < kHist; ++p) to[p * hk + c] = input(first + p);
    };
    if constexpr (kSlices) {
      for (int t = 0; t < n; ++t) {
        const int64_t row = row_of<kSlices>(batch, seq, t);
        if (records.before[row] >= 0) keep(records.before[row], t);
        if (records.after[row] >= 0) keep(records.after[row], t + 1);
      }
    }
    float next[kHist];
    for (int p = 0; p < kHist; ++p) next[p] = input(n + p);  // the new history row p
    for (int p = 0; p < kHist; ++p) hist[p * hk + c] = next[p];
  }
}

// One block: 4 warps of one head of one sequence. A warp holds 32 / kParts value columns x kParts
// key parts; lane = part * (32 / kParts) + column, and a thread holds S[part*K/kParts ..][column]
// in registers, so a step's decay, read, write and query touch registers only; S^T k and S^T q
// reduce over the parts by a xor butterfly (every lane gets the same bits). Decode uses 4 parts
// (8 adjacent columns: each state load fills whole 32-byte sectors); prefill uses 8 parts (more
// warps, shorter FMA chains: a prefill step is latency-bound) and loads the next row's inputs
// while the current row computes.
template <int kK, int kParts>
struct KdaTiling {
  static constexpr int kColsPerWarp = 32 / kParts;
  static constexpr int kColsPerBlock = 4 * kColsPerWarp;
  static constexpr int kKeysPerPart = kK / kParts;
  static constexpr int kVec = kKeysPerPart / 4;  // float4 loads per input per step
};

template <int kVec>
struct StepInputs {
  float4 k[kVec], q[kVec], d[kVec];
  float v, beta;
};

template <int kVec>
__device__ __forceinline__ void load_step(StepInputs<kVec>& in, const float* k, const float* q,
                                          const float* decay, const float* v, const float* beta,
                                          int64_t at, int64_t col_at, int64_t beta_at) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    in.k[i] = __ldcg(reinterpret_cast<const float4*>(k + at) + i);
    in.q[i] = __ldcg(reinterpret_cast<const float4*>(q + at) + i);
    in.d[i] = __ldcg(reinterpret_cast<const float4*>(decay + at) + i);
  }
  in.v = __ldcg(v + col_at);
  in.beta = __ldcg(beta + beta_at);
}

template <int kParts>
__device__ __forceinline__ float part_sum(float x) {
#pragma unroll
  for (int m = 32 / kParts; m < 32; m <<= 1) x = x + __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}

// With kSlices (a verify step's slices), the state just before or after a row that keeps a
// record in `records` is copied there from the registers (KdaRowRecords).
template <int kK, int kParts, bool kSlices = false>
__global__ void __launch_bounds__(128)
    recurrent_kernel(const KdaBatch batch, const float* __restrict__ q, const float* __restrict__ k,
                     const float* __restrict__ v, const float* __restrict__ decay,
                     const float* __restrict__ beta, float* __restrict__ state,
                     float* __restrict__ o, const KdaRowRecords records) {
  using T = KdaTiling<kK, kParts>;
  constexpr int kKeysPerPart = T::kKeysPerPart, kVec = T::kVec;
  pdl_wait();  // q, k, v, decay and beta of the kernel ahead; the state of an earlier one
  pdl_trigger();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int part = lane / T::kColsPerWarp;
  const int col = blockIdx.x * T::kColsPerBlock + warp * T::kColsPerWarp + lane % T::kColsPerWarp;
  const int h = blockIdx.y, seq = blockIdx.z, n = rows_of<kSlices>(batch, seq);
  const int64_t hk = int64_t(batch.heads) * kK;
  const int key0 = part * kKeysPerPart;
  const int64_t slot = slot_of(batch, seq);
  float* s_ptr = state + ((slot * batch.heads + h) * kK + key0) * kK + col;
  auto keep = [&](int record, const float* s) {
    float* to = records.record_state +
                (((slot * records.records + record) * batch.heads + h) * kK + key0) * kK + col;
#pragma unroll
    for (int i = 0; i < kKeysPerPart; ++i) to[int64_t(i) * kK] = s[i];
  };

  float s[kKeysPerPart];  // S[key0 + i][col]
#pragma unroll
  for (int i = 0; i < kKeysPerPart; ++i) s[i] = s_ptr[int64_t(i) * kK];

  int64_t row = row_of<kSlices>(batch, seq, 0);
  StepInputs<kVec> cur, next;
  load_step(cur, k, q, decay, v, beta, row * hk + h * kK + key0, row * hk + h * kK + col,
            row * batch.heads + h);
  for (int t = 0; t < n; ++t) {
    const int64_t following = t + 1 < n ? row_of<kSlices>(batch, seq, t + 1) : row;
    if (t + 1 < n)
      load_step(next, k, q, decay, v, beta, following * hk + h * kK + key0,
                following * hk + h * kK + col, following * batch.heads + h);
    if constexpr (kSlices)
      if (records.before[row] >= 0) keep(records.before[row], s);
    float kv = 0.0f;
#pragma unroll
    for (int i4 = 0; i4 < kVec; ++i4) {
      const float4 kk = cur.k[i4], dd = cur.d[i4];
      s[4 * i4 + 0] *= dd.x, s[4 * i4 + 1] *= dd.y, s[4 * i4 + 2] *= dd.z, s[4 * i4 + 3] *= dd.w;
      kv = fmaf(kk.x, s[4 * i4 + 0], kv);
      kv = fmaf(kk.y, s[4 * i4 + 1], kv);
      kv = fmaf(kk.z, s[4 * i4 + 2], kv);
      kv = fmaf(kk.w, s[4 * i4 + 3], kv);
    }
    kv = part_sum<kParts>(kv);
    const float d = cur.beta * (cur.v - kv);
    float out = 0.0f;
#pragma unroll
    for (int i4 = 0; i4 < kVec; ++i4) {
      const float4 kk = cur.k[i4], qq = cur.q[i4];
      s[4 * i4 + 0] = fmaf(kk.x, d, s[4 * i4 + 0]);
      s[4 * i4 + 1] = fmaf(kk.y, d, s[4 * i4 + 1]);
      s[4 * i4 + 2] = fmaf(kk.z, d, s[4 * i4 + 2]);
      s[4 * i4 + 3] = fmaf(kk.w, d, s[4 * i4 + 3]);
      out = fmaf(qq.x, s[4 * i4 + 0], out);
      out = fmaf(qq.y, s[4 * i4 + 1], out);
      out = fmaf(qq.z, s[4 * i4 + 2], out);
      out = fmaf(qq.w, s[4 * i4 + 3], out);
    }
    out = part_sum<kParts>(out);
    if (part == 0) o[row * hk + h * kK + col] = out;
    if constexpr (kSlices)
      if (records.after[row] >= 0) keep(records.after[row], s);
    cur = next;
    row = following;
  }
#pragma unroll
  for (int i = 0; i < kKeysPerPart; ++i) s_ptr[int64_t(i) * kK] = s[i];
}

struct GateParams {
  const float* o;
  const float* gate;
  const float* o_norm;
  float* out;
  uint16_t* out_bf16;
  int heads;
  float eps;
};

// Grid: (H, rows); block: V threads.
template <int kK>
__global__ void __launch_bounds__(kK) output_gate_kernel(const __grid_constant__ GateParams p) {
  pdl_trigger();  // o_proj after it may start loading its weights
  pdl_wait();     // o and the gate of the kernels ahead
  __shared__ float scratch[32];
  const int64_t at = (int64_t(blockIdx.y) * p.heads + blockIdx.x) * kK + threadIdx.x;
  const float x = p.o[at];
  const float ss = block_sum(x * x, scratch);
  const float r = 1.0f / sqrtf(ss / float(kK) + p.eps);
  const float y = x * r * p.o_norm[threadIdx.x] * sigmoidf_dev(p.gate[at]);
  p.out[at] = y;
  if (p.out_bf16) p.out_bf16[at] = f32_to_bf16_bits(y);
}

void check_batch(const KdaBatch& b) {
  SPARKGLM_ASSERT(b.num_seqs > 0 && b.rows_per_seq > 0 && b.heads > 0 && b.num_seqs <= 65535 &&
                      b.rows_per_seq <= 65535 * 1024,
                  "kda: batch shape out of range");
  if (b.head_dim != kKdaHeadDim && b.head_dim != kKdaMicroHeadDim)
    throw Error(ErrorKind::kUnsupported, "KDA kernels: linear_attn_config.head_dim " +
                                             std::to_string(b.head_dim) +
                                             " (served: " + std::to_string(kKdaHeadDim) + ", " +
                                             std::to_string(kKdaMicroHeadDim) + ")");
}

// Calls f(std::integral_constant<int, K>{}) for the batch's head dim.
template <typename F>
void with_head_dim(const KdaBatch& b, F&& f) {
  if (b.head_dim == kKdaHeadDim) {
    f(std::integral_constant<int, kKdaHeadDim>{});
  } else {
    f(std::integral_constant<int, kKdaMicroHeadDim>{});
  }
}

}  // namespace

void kda_prepare(const KdaBatch& batch, const KdaPrepareArgs& args, cudaStream_t stream) {
  check_batch(batch);
  const dim3 grid(unsigned(batch.heads), unsigned(batch.num_seqs * batch.rows_per_seq));
  with_head_dim(batch, [&](auto k) {
    constexpr int kK = decltype(k)::value;
    if (batch.slice_rows) {
      launch_dependent(prepare_kernel<kK, true>, grid, kK, 0, stream, batch, args);
    } else {
      launch_dependent(prepare_kernel<kK, false>, grid, kK, 0, stream, batch, args);
    }
  });
}

void kda_advance_conv_history(const KdaBatch& batch, const float* raw_q, const float* raw_k,
                              const float* raw_v, float* conv_hist, cudaStream_t stream,
                              int64_t raw_stride) {
  check_batch(batch);
  SPARKGLM_ASSERT(!batch.slice_rows, "kda_advance_conv_history: slices go to kda_verify_slices");
  const dim3 grid(unsigned(batch.heads), unsigned(batch.num_seqs));
  const int64_t rs = raw_stride > 0 ? raw_stride : int64_t(batch.heads) * batch.head_dim;
  with_head_dim(batch, [&](auto k) {
    launch_dependent(advance_hist_kernel<decltype(k)::value, false>, grid, decltype(k)::value, 0,
                     stream, batch, raw_q, raw_k, raw_v, rs, conv_hist, KdaRowRecords{});
  });
}

void kda_recurrent(const KdaBatch& batch, const float* q, const float* k, const float* v,
                   const float* decay, const float* beta, float* state, float* o,
                   cudaStream_t stream) {
  check_batch(batch);
  SPARKGLM_ASSERT(!batch.slice_rows, "kda_recurrent: slices go to kda_verify_slices");
  if (batch.head_dim == kKdaMicroHeadDim) {
    // One tiling for every row count at the micro head dim (4 key parts, one block per head):
    // prefill takes this kernel too (kda_chunked.h is specialised to K = 128), so a row's bits do
    // not depend on how its prompt was cut.
    constexpr int kK = kKdaMicroHeadDim;
    const dim3 grid(kK / KdaTiling<kK, 4>::kColsPerBlock, unsigned(batch.heads),
                    unsigned(batch.num_seqs));
    launch_dependent(recurrent_kernel<kK, 4>, grid, 128, 0, stream, batch, q, k, v, decay, beta,
                     state, o, KdaRowRecords{});
  } else if (batch.rows_per_seq == 1) {
    constexpr int kK = kKdaHeadDim;
    const dim3 grid(kK / KdaTiling<kK, 4>::kColsPerBlock, unsigned(batch.heads),
                    unsigned(batch.num_seqs));
    launch_dependent(recurrent_kernel<kK, 4>, grid, 128, 0, stream, batch, q, k, v, decay, beta,
                     state, o, KdaRowRecords{});
  } else {
    constexpr int kK = kKdaHeadDim;
    const dim3 grid(kK / KdaTiling<kK, 8>::kColsPerBlock, unsigned(batch.heads),
                    unsigned(batch.num_seqs));
    launch_dependent(recurrent_kernel<kK, 8>, grid, 128, 0, stream, batch, q, k, v, decay, beta,
                     state, o, KdaRowRecords{});
  }
}

void kda_verify_slices(const KdaBatch& batch, const KdaPrepareArgs& a, float* conv_hist,
                       float* state, float* o, const KdaRowRecords& records, cudaStream_t stream) {
  check_batch(batch);
  SPARKGLM_ASSERT(batch.slice_rows && batch.slice_first && records.after && records.before &&
                      a.conv_hist == conv_hist,
                  "kda_verify_slices: the slices' rows, the record words and one conv history");
  kda_prepare(batch, a, stream);
  const int64_t rs = a.raw_stride > 0 ? a.raw_stride : int64_t(batch.heads) * batch.head_dim;
  with_head_dim(batch, [&](auto k) {
    constexpr int kK = decltype(k)::value;
    launch_dependent(advance_hist_kernel<kK, true>,
                     dim3(unsigned(batch.heads), unsigned(batch.num_seqs), 3), kK, 0, stream, batch,
                     a.raw_q, a.raw_k, a.raw_v, rs, conv_hist, records);
    // The decode tiling (4 key parts) at every K: each row's bits are a one-row decode row's.
    const dim3 grid(kK / KdaTiling<kK, 4>::kColsPerBlock, unsigned(batch.heads),
                    unsigned(batch.num_seqs));
    launch_dependent(recurrent_kernel<kK, 4, true>, grid, 128, 0, stream, batch, a.q, a.k, a.v,
                     a.decay, a.beta, state, o, records);
  });
}

void kda_output_gate(const KdaBatch& batch, const float* o, const float* gate, const float* o_norm,
                     float eps, float* out, uint16_t* out_bf16, cudaStream_t stream) {
  check_batch(batch);
  const dim3 grid(unsigned(batch.heads), unsigned(batch.num_seqs * batch.rows_per_seq));
  with_head_dim(batch, [&](auto k) {
    launch_dependent(output_gate_kernel<decltype(k)::value>, grid, decltype(k)::value, 0, stream,
                     GateParams{o, gate, o_norm, out, out_bf16, batch.heads, eps});
  });
}

}  // namespace sparkglm::cuda
