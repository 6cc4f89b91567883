#include "engine/backend/cuda/moe_quant_experts.h"

#include <initializer_list>
#include <string>

#include "engine/backend/cuda/bf16_pairs.cuh"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/moe_decode_device.cuh"
#include "engine/backend/cuda/moe_quant_baseline.h"
#include "engine/backend/cuda/moe_quant_device.cuh"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/scale_codes.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

using moe_decode::kRows;
using moe_decode::kSplitK;
using moe_quant::ExpertView;
using moe_quant::QuantDecodeArgs;

constexpr int kStep = 128;                       // k per step of a warp; lane t: 32 of them
constexpr int64_t kKMultiple = kStep * kSplitK;  // 512

// Steps of weights in flight ahead of the one multiplied (a decode MoE is a weight stream, and
// only bytes in flight hide HBM's latency), as many as 128 registers a thread hold without
// spilling: an NVFP4 step is half the bytes of an 8-bit one, gate/up streams two operands.
template <QuantFormat F, int kOps>
constexpr int kDepth = (F == QuantFormat::kNvfp4 ? 3 : 2) - (kOps - 1);

// One step's raw weights of one operand for this lane's two W rows (g and g + 8), 32
// consecutive k each.
template <QuantFormat F>
struct Raw {
  uint4 v[2][2] = {};  // [row][half]: 32 E4M3 bytes
  uint32_t s[2] = {};  // [row]: MXFP8 the E8M0 code; FP8 block unused
};
template <>
struct Raw<QuantFormat::kNvfp4> {
  uint4 v[2] = {};     // [row]: 32 E2M1 nibbles (low nibble = the even k)
  uint32_t s[2] = {};  // [row]: two E4M3 block-scale codes, k kc .. kc + 15 in the low byte
};

// kc: this lane's first k of the step (a multiple of 32).
template <QuantFormat F>
__device__ __forceinline__ Raw<F> load_raw(const ExpertView& w, int64_t k, int64_t r0, int64_t r1,
                                           int64_t kc) {
  Raw<F> r;
  const int64_t row[2] = {r0, r1};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    if constexpr (F == QuantFormat::kNvfp4) {
      r.v[i] = load_stream(w.data + row[i] * (k / 2) + kc / 2);
      r.s[i] =
          __ldg(reinterpret_cast<const unsigned short*>(w.scale + row[i] * (k / 16) + kc / 16));
    } else {
      const uint8_t* p = w.data + row[i] * k + kc;
      r.v[i][0] = load_stream(p);
      r.v[i][1] = load_stream(p + 16);
      if constexpr (F == QuantFormat::kMxfp8)
        r.s[i] = uint32_t(__ldg(w.scale + row[i] * (k / 32) + kc / 32));
    }
  }
  return r;
}

// Row i of `r` as 16 BF16 pairs, p[j] holding k kc + 2j, kc + 2j + 1: the baseline's values,
// in fewer instructions (bf16_pairs.cuh).
//   NVFP4  table pair times the E4M3 block scale as BF16: e2m1 has at most 2 significant bits and
//          E4M3 4, so the product (6 bits, 2^-10 .. 2688 in magnitude) is a BF16 value: exact.
//   MXFP8  E4M3 pair times 2^(e - 127) as BF16: exact for E8M0 codes 3 .. 254 (the product is a
//          multiple of 2^-133 with at most 4 significant bits); codes 0 .. 2 round to nearest where
//          the baseline truncated (no quantizer emits them for weights of normal size).
//   FP8 block  the E4M3 pairs as they are.
template <QuantFormat F>
__device__ __forceinline__ void to_bf16_pairs(const Raw<F>& r, int i, const uint32_t* lut,
                                              uint32_t* p) {
  if constexpr (F == QuantFormat::kNvfp4) {
    const uint32_t s0 = bf16x2_splat_exact(e4m3_to_f32(uint8_t(r.s[i] & 0xffu)));  // k kc ..
    const uint32_t s1 = bf16x2_splat_exact(e4m3_to_f32(uint8_t(r.s[i] >> 8)));     // kc + 16 ..
    const uint32_t u[4] = {r.v[i].x, r.v[i].y, r.v[i].z, r.v[i].w};
#pragma unroll
    for (int j = 0; j < 16; ++j)  // byte j: k 2j (low nibble), 2j + 1 (high nibble)
      p[j] = bf16x2_mul_exact(e2m1_pair(lut, u[j / 4], j % 4), j < 8 ? s0 : s1);
  } else {
    const uint32_t u[8] = {r.v[i][0].x, r.v[i][0].y, r.v[i][0].z, r.v[i][0].w,
                           r.v[i][1].x, r.v[i][1].y, r.v[i][1].z, r.v[i][1].w};
#pragma unroll
    for (int q = 0; q < 8; ++q) e4m3_adjacent_pairs(u[q], p + 2 * q);  // bytes 4q .. 4q + 3
    if constexpr (F == QuantFormat::kMxfp8) {
      const uint32_t s = bf16x2_splat_exact(e8m0_to_f32_dev(r.s[i]));
#pragma unroll
      for (int j = 0; j < 16; ++j) p[j] = bf16x2_mul_exact(p[j], s);
    }
  }
}

// acc[o] += the step's 16 x 128 block of operand o's W (rows g, g + 8 from this lane) times the 8
// columns x (this lane's column x_col, null: zeros), 8 MMAs in k order: MMA j takes k kc + 4j ..
// kc + 4j + 3 of each lane, for A and B alike. The x fragments are loaded once for all operands.
// FP8 block: each operand's step partial (from zero) is scaled by its scale_inv into acc[o], as
// the baseline does.
template <QuantFormat F, int kOps>
__device__ __forceinline__ void step_mma(const Raw<F> (&r)[kOps], const ExpertView (&w)[kOps],
                                         int64_t k, int64_t row0, const uint16_t* x_col, int64_t kb,
                                         const uint32_t* lut, float (&acc)[kOps][4]) {
  const int64_t kc = kb + 32 * ((threadIdx.x & 31) & 3);
  uint32_t xb[16];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    uint4 v = make_uint4(0, 0, 0, 0);
    if (x_col) v = __ldg(reinterpret_cast<const uint4*>(x_col + kc) + q);
    xb[4 * q] = v.x;
    xb[4 * q + 1] = v.y;
    xb[4 * q + 2] = v.z;
    xb[4 * q + 3] = v.w;
  }
#pragma unroll
  for (int o = 0; o < kOps; ++o) {
    uint32_t a0[16], a1[16];
    to_bf16_pairs<F>(r[o], 0, lut, a0);
    to_bf16_pairs<F>(r[o], 1, lut, a1);
    float part[4] = {0, 0, 0, 0};
    float* c = F == QuantFormat::kFp8Block ? part : acc[o];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      mma_bf16(c, a0[2 * j], a1[2 * j], a0[2 * j + 1], a1[2 * j + 1], xb[2 * j], xb[2 * j + 1]);
    if constexpr (F == QuantFormat::kFp8Block) {
      const float s = __ldg(w[o].scale_inv + (row0 / 128) * (k / 128) + kb / 128);
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[o][i] = fmaf(part[i], s, acc[o][i]);
    }
  }
}

// acc[o] (one MMA C fragment each) += rows [row0, row0 + 16) of w[o] ([rows, k]) times the 8
// columns, over this warp's quarter of k, 128 k per step in increasing order: the baseline's
// sequence of MMAs for every operand, so the same bits. The weights of the next kDepth steps of
// every operand are loaded before a step's MMAs.
template <QuantFormat F, int kOps>
__device__ __forceinline__ void rows_times_x(const ExpertView (&w)[kOps], int64_t k, int64_t row0,
                                             int64_t rows, const uint16_t* x_col,
                                             const uint32_t* lut, float (&acc)[kOps][4]) {
  constexpr int kD = kDepth<F, kOps>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t r0 = min(row0 + g, rows - 1), r1 = min(row0 + g + 8, rows - 1);
  const int64_t per = k / kSplitK, k0 = warp * per, k1 = k0 + per;
  Raw<F> buf[kD][kOps];
#pragma unroll
  for (int d = 0; d < kD; ++d)
    if (k0 + d * kStep < k1)
#pragma unroll
      for (int o = 0; o < kOps; ++o)
        buf[d][o] = load_raw<F>(w[o], k, r0, r1, k0 + d * kStep + 32 * t);
  for (int64_t kb = k0; kb < k1; kb += kD * kStep) {
#pragma unroll
    for (int d = 0; d < kD; ++d) {
      const int64_t ks = kb + d * kStep;
      if (ks >= k1) break;  // uniform across the warp
      Raw<F> cur[kOps];
#pragma unroll
      for (int o = 0; o < kOps; ++o) cur[o] = buf[d][o];
      if (ks + kD * kStep < k1)
#pragma unroll
        for (int o = 0; o < kOps; ++o)
          buf[d][o] = load_raw<F>(w[o], k, r0, r1, ks + kD * kStep + 32 * t);
      step_mma<F, kOps>(cur, w, k, row0, x_col, ks, lut, acc);
    }
  }
}

// The E2M1 pair table of an NVFP4 kernel (a 4-word stub otherwise), filled by the whole block.
template <QuantFormat F>
struct PairTable {
  static constexpr int kWords = F == QuantFormat::kNvfp4 ? kE2m1TableWords : 4;
  __device__ __forceinline__ static void fill(uint32_t* table) {
    if constexpr (F == QuantFormat::kNvfp4) {
      fill_e2m1_table(table);
      __syncthreads();
    }
  }
};

// Grid: (W / 16, max groups). h[pair][n] = SwiGLU(gs_gate * g_n, gs_up * u_n), 16 rows n, for the
// group's pairs; gate and up stream together through one pipeline.
// NVFP4's deeper pipeline needs more than 128 registers a thread: three blocks an SM, not four.
template <QuantFormat F>
__global__ void __launch_bounds__(kSplitK * 32, F == QuantFormat::kNvfp4 ? 3 : 4)
    gate_up_kernel(const __grid_constant__ QuantDecodeArgs q) {
  __shared__ float partial_g[kSplitK - 1][32][4], partial_u[kSplitK - 1][32][4];
  __shared__ __align__(16) uint32_t table[PairTable<F>::kWords];
  const MoeExpertArgs& a = q.a;
  int pair = -1;
  const int32_t* grp = moe_decode::block_group(a, &pair);
  if (!grp) return;  // uniform across the block
  PairTable<F>::fill(table);
  const int e = grp[0];
  const ExpertView w[2] = {moe_quant::view_of(q.gate, e), moe_quant::view_of(q.up, e)};
  const int64_t n0 = int64_t(blockIdx.x) * kRows;
  const uint16_t* x = pair >= 0 ? a.x + (pair / a.top_k) * a.hidden : nullptr;
  const int lane = threadIdx.x & 31, row = lane >> 2, t = lane & 3;
  float acc[2][4] = {};
  rows_times_x<F, 2>(w, a.hidden, n0, a.width, x, table + lane, acc);
  moe_decode::reduce_warps(partial_g, acc[0]);
  if (!moe_decode::reduce_warps(partial_u, acc[1])) return;
  const float* g = acc[0];
  const float* u = acc[1];
  // This lane holds columns 2t, 2t + 1: their pairs are those of lanes 8t and 8t + 4.
  for (int c = 0; c < 2; ++c) {
    const int p = grp[1 + 2 * t + c];
    if (p < 0) continue;
    uint16_t* h = a.h + int64_t(p) * a.width;
    h[n0 + row] = f32_to_bf16_bits(
        moe_decode::swiglu(g[c] * w[0].global_scale, u[c] * w[1].global_scale, a.clamp_limit));
    h[n0 + row + 8] = f32_to_bf16_bits(moe_decode::swiglu(
        g[2 + c] * w[0].global_scale, u[2 + c] * w[1].global_scale, a.clamp_limit));
  }
}

// Grid: (D / 16, max groups). y[pair][n] = gs_down * (W_down h[pair])[n] for the group's pairs.
template <QuantFormat F>
__global__ void __launch_bounds__(kSplitK * 32, 4)
    down_kernel(const __grid_constant__ QuantDecodeArgs q) {
  __shared__ float partial[kSplitK - 1][32][4];
  __shared__ __align__(16) uint32_t table[PairTable<F>::kWords];
  const MoeExpertArgs& a = q.a;
  int pair = -1;
  const int32_t* grp = moe_decode::block_group(a, &pair);
  if (!grp) return;  // uniform across the block
  PairTable<F>::fill(table);
  const ExpertView w[1] = {moe_quant::view_of(q.down, grp[0])};
  const int64_t n0 = int64_t(blockIdx.x) * kRows;
  const int lane = threadIdx.x & 31, row = lane >> 2, t = lane & 3;
  float acc[1][4] = {};
  rows_times_x<F, 1>(w, a.width, n0, a.hidden, pair >= 0 ? a.h + int64_t(pair) * a.width : nullptr,
                     table + lane, acc);
  if (!moe_decode::reduce_warps(partial, acc[0])) return;
  for (int c = 0; c < 2; ++c) {
    const int p = grp[1 + 2 * t + c];
    if (p < 0) continue;
    float* y = a.y + int64_t(p) * a.hidden;
    y[n0 + row] = acc[0][c] * w[0].global_scale;
    y[n0 + row + 8] = acc[0][2 + c] * w[0].global_scale;
  }
}

// Grid: (T, ceil(W / 256)), one element a thread; the shared expert's h = SwiGLU(g, u) from its
// gate [T, W] and up [T, W] products.
__global__ void __launch_bounds__(256)
    shared_swiglu_kernel(const float* gu, int64_t tokens, int64_t width, float limit, uint16_t* h) {
  const int64_t t = blockIdx.x, n = int64_t(blockIdx.y) * blockDim.x + threadIdx.x;
  if (n >= width) return;
  h[t * width + n] =
      f32_to_bf16_bits(moe_decode::swiglu(gu[t * width + n], gu[(tokens + t) * width + n], limit));
}

template <QuantFormat F>
void launch_experts(const QuantDecodeArgs& q, unsigned pairs, cudaStream_t stream) {
  gate_up_kernel<F><<<dim3(unsigned(q.a.width / kRows), pairs), kSplitK * 32, 0, stream>>>(q);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <QuantFormat F>
void launch_down(const QuantDecodeArgs& q, unsigned pairs, cudaStream_t stream) {
  down_kernel<F><<<dim3(unsigned(q.a.hidden / kRows), pairs), kSplitK * 32, 0, stream>>>(q);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

// Why `op` cannot feed the decode kernels (empty when it can).
std::string operand_problem(const MoeQuantOperand& op) {
  if (!op.data) return "no data array";
  switch (op.format) {
    case QuantFormat::kNvfp4:
      return op.scale && op.global_scale ? "" : "NVFP4 needs its scale and global_scale arrays";
    case QuantFormat::kMxfp8:
      return op.scale ? "" : "MXFP8 needs its scale array";
    case QuantFormat::kFp8Block:
      return op.scale_inv ? "" : "FP8 block needs its scale_inv array";
  }
  return "unknown format";
}

// y = x W^T for the shared expert's projection `l` over T decode rows.
void shared_linear(const Linear& l, const uint16_t* x, int64_t tokens, float* y,
                   cudaStream_t stream, QuantKernel kernel) {
  if (l.quantized()) {
    quantized_gemv(x, tokens, quantized_weight(l), y, stream, kernel);
    return;
  }
  SPARKGLM_ASSERT(l.dtype == DType::kBF16,
                  "moe_experts_decode_quantized: a dense shared expert "
                  "projection must be BF16");
  gemv_bf16(x, tokens, l.bf16(), l.rows, l.cols, y, stream);
}

}  // namespace

void moe_decode_down_quantized(const MoeExpertArgs& a, const MoeQuantOperand& w,
                               cudaStream_t stream) {
  SPARKGLM_ASSERT(a.width % kKMultiple == 0 && a.hidden % kRows == 0 && a.groups != nullptr,
                  "moe_decode_down_quantized: width a multiple of 512, hidden of 16, and groups");
  const std::string problem = operand_problem(w);
  if (!problem.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "moe_decode_down_quantized: " + std::string(quant_format_name(w.format)) +
                    " operand: " + problem);
  if (a.tokens <= 0) return;
  const QuantDecodeArgs qa{a, MoeQuantOperand{}, MoeQuantOperand{}, w};
  moe_quant::by_format(w.format, [&](auto f) {
    launch_down<decltype(f)::value>(qa, unsigned(a.tokens * a.top_k), stream);
  });
}

void moe_experts_decode_quantized(const MoeExpertArgs& args, const MoeQuantExperts& q,
                                  cudaStream_t stream, QuantKernel kernel) {
  SPARKGLM_ASSERT(args.hidden % kKMultiple == 0 && args.width % kKMultiple == 0 && args.top_k > 0 &&
                      args.groups != nullptr,
                  "moe_experts_decode_quantized: hidden and expert width must be multiples of "
                  "512, top_k positive, and the groups workspace given");
  for (const MoeQuantOperand* op : {&q.gate, &q.up, &q.down}) {
    const std::string problem = operand_problem(*op);
    if (!problem.empty())
      throw Error(ErrorKind::kInvalidArgument, "moe_experts_decode_quantized: routed " +
                                                   std::string(quant_format_name(op->format)) +
                                                   " operand: " + problem);
  }
  if (q.gate.format != q.up.format)
    throw Error(ErrorKind::kInvalidArgument,
                "moe_experts_decode_quantized: gate_proj and up_proj must share a format");
  const bool shared = q.shared_gate != nullptr;
  if (shared) {
    const bool shapes = q.shared_up && q.shared_down && q.shared_gate->rows == args.width &&
                        q.shared_gate->cols == args.hidden && q.shared_up->rows == args.width &&
                        q.shared_up->cols == args.hidden && q.shared_down->rows == args.hidden &&
                        q.shared_down->cols == args.width;
    if (!shapes || args.tokens > kQuantGemvMaxRows || !args.shared_gu || !args.shared_h ||
        !args.shared_y)
      throw Error(ErrorKind::kInvalidArgument,
                  "moe_experts_decode_quantized: the shared expert needs gate and up [W, D] and "
                  "down [D, W], at most 32 tokens, and the shared workspaces");
  } else if (q.shared_up || q.shared_down) {
    throw Error(ErrorKind::kInvalidArgument,
                "moe_experts_decode_quantized: shared up/down given without a shared gate");
  }
  if (args.tokens <= 0) return;

  MoeExpertArgs a = args;
  // The combine adds shared_y when this pointer is set; it is never read.
  a.shared_gate_up = shared ? static_cast<const uint16_t*>(q.shared_gate->data) : nullptr;
  a.gate_up = nullptr;
  a.down = nullptr;
  a.shared_down = nullptr;
  const unsigned pairs = unsigned(a.tokens * a.top_k);  // the most groups there can be
  moe_decode_group(a, stream);
  const QuantDecodeArgs qa{a, q.gate, q.up, q.down};
  if (kernel == QuantKernel::kBaseline) {
    moe_quant::launch_routed_baseline(qa, pairs, stream);
  } else {
    moe_quant::by_format(q.gate.format,
                         [&](auto f) { launch_experts<decltype(f)::value>(qa, pairs, stream); });
    moe_quant::by_format(q.down.format,
                         [&](auto f) { launch_down<decltype(f)::value>(qa, pairs, stream); });
  }
  if (shared) {
    const int64_t T = a.tokens, W = a.width;
    shared_linear(*q.shared_gate, a.x, T, a.shared_gu, stream, kernel);
    shared_linear(*q.shared_up, a.x, T, a.shared_gu + T * W, stream, kernel);
    shared_swiglu_kernel<<<dim3(unsigned(T), unsigned((W + 255) / 256)), 256, 0, stream>>>(
        a.shared_gu, T, W, a.clamp_limit, a.shared_h);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
    shared_linear(*q.shared_down, a.shared_h, T, a.shared_y, stream, kernel);
  }
  moe_decode_combine(a, stream);
}

}  // namespace sparkglm::cuda
