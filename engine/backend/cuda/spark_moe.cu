#include "engine/backend/cuda/spark_moe.h"

#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/fp4_rounding.cuh"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/moe_decode_device.cuh"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/quantized_linear.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kBlock = fp4::kNvBlock;

unsigned grid_for(int64_t n) {
  const int64_t g = (n + kThreads - 1) / kThreads;
  return unsigned(g < 65536 ? g : 65536);
}

// The expert of pair p, or -1 for an empty slot.
__device__ __forceinline__ int pair_expert(const MoeExpertArgs& a, int64_t p) {
  const int e = a.experts[p];
  return e >= 0 && e < a.n_experts ? e : -1;
}

struct SparkKernelArgs {
  MoeExpertArgs a;
  const float* x_f32;   // [T, D]
  const float* scales;  // [2E]
  uint16_t* xq;         // [T * k, D]
  const float* g;       // gate products of pair p at g + p * stride
  const float* u;       // up products at u + p * stride
  int64_t stride;
};

// Step 2, one thread per 16-value block of a pair's input.
__global__ void quantize_inputs_kernel(const __grid_constant__ SparkKernelArgs s) {
  const MoeExpertArgs& a = s.a;
  const int64_t per = a.hidden / kBlock, pairs = a.tokens * a.top_k;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < pairs * per;
       b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = b / per, c0 = (b % per) * kBlock;
    const int e = pair_expert(a, p);
    if (e < 0) continue;
    const float* x = s.x_f32 + (p / a.top_k) * a.hidden + c0;
    float v[kBlock];
    for (int i = 0; i < kBlock; ++i) v[i] = x[i];
    fp4::nvfp4_round_block(v, kBlock, s.scales[e]);
    for (int i = 0; i < kBlock; ++i) s.xq[p * a.hidden + c0 + i] = f32_to_bf16_bits(v[i]);
  }
}

// Step 4, one thread per 16-value block of a pair's h: the global scale s_gu on g and u (the
// products were of q), SwiGLU with the clamp, then NVFP4 with s_down into a.h.
__global__ void swiglu_quantize_kernel(const __grid_constant__ SparkKernelArgs s) {
  const MoeExpertArgs& a = s.a;
  const int64_t per = a.width / kBlock, pairs = a.tokens * a.top_k;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < pairs * per;
       b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = b / per, c0 = (b % per) * kBlock;
    const int e = pair_expert(a, p);
    if (e < 0) continue;
    const float s_gu = s.scales[e], s_down = s.scales[a.n_experts + e];
    float h[kBlock];
    for (int i = 0; i < kBlock; ++i)
      h[i] = moe_decode::swiglu(s.g[p * s.stride + c0 + i] * s_gu,
                                s.u[p * s.stride + c0 + i] * s_gu, a.clamp_limit);
    fp4::nvfp4_round_block(h, kBlock, s_down);
    for (int i = 0; i < kBlock; ++i) a.h[p * a.width + c0 + i] = f32_to_bf16_bits(h[i]);
  }
}

// Step 5's global scale: y[p] *= s_down of p's expert.
__global__ void scale_outputs_kernel(const __grid_constant__ SparkKernelArgs s) {
  const MoeExpertArgs& a = s.a;
  const int64_t pairs = a.tokens * a.top_k;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < pairs * a.hidden;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int e = pair_expert(a, i / a.hidden);
    if (e >= 0) a.y[i] = a.y[i] * s.scales[a.n_experts + e];
  }
}

// The shared expert's h = SwiGLU(g, u), g and u [T, W] one after the other in shared_gu.
__global__ void shared_swiglu_kernel(const __grid_constant__ MoeExpertArgs a) {
  const int64_t n = a.tokens * a.width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    a.shared_h[i] =
        f32_to_bf16_bits(moe_decode::swiglu(a.shared_gu[i], a.shared_gu[n + i], a.clamp_limit));
}

// y = x W^T over the T <= 32 rows: quantized_gemv, or gemv_bf16 for a dense BF16 Linear.
void rows_times(const Linear& l, const uint16_t* x, int64_t tokens, float* y, cudaStream_t stream) {
  if (l.quantized()) {
    quantized_gemv(x, tokens, quantized_weight(l), y, stream);
    return;
  }
  SPARKGLM_ASSERT(l.dtype == DType::kBF16, "moe_experts_spark: a dense shared projection is BF16");
  gemv_bf16(x, tokens, l.bf16(), l.rows, l.cols, y, stream);
}

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "moe_experts_spark: " + what);
}

}  // namespace

void moe_experts_spark(const SparkMoeArgs& args, cudaStream_t stream) {
  const MoeExpertArgs& in = args.a;
  if (in.hidden % 32 != 0 || in.width % 32 != 0 || in.top_k <= 0 || in.tokens > 32)
    refuse("hidden and width multiples of 32, top_k > 0 and at most 32 tokens");
  if (args.quant && (in.hidden % 512 != 0 || in.width % 512 != 0))
    refuse("quantized routed experts need hidden and width multiples of 512");
  if (!args.x_f32 || !args.scales || !args.xq || !args.gu || !in.h || !in.y || !in.groups)
    refuse("x_f32, scales and the xq, gu, h, y and groups workspaces are required");
  if (!args.quant && (!in.gate_up || !in.down))
    refuse("BF16 routed experts need the gate_up and down pointer arrays");
  const bool shared = args.shared_gate != nullptr;
  if (shared && (!args.shared_up || !args.shared_down || !in.shared_gu || !in.shared_h ||
                 !in.shared_y || args.shared_gate->rows != in.width ||
                 args.shared_gate->cols != in.hidden || args.shared_up->rows != in.width ||
                 args.shared_down->rows != in.hidden || args.shared_down->cols != in.width))
    refuse("the shared expert needs gate and up [W, D], down [D, W] and its workspaces");
  if (in.tokens <= 0) return;
  const int64_t T = in.tokens, P = T * in.top_k, D = in.hidden, W = in.width;

  MoeExpertArgs a = in;
  a.shared_gate_up = nullptr;  // the combine adds shared_y when set (below)
  a.shared_down = nullptr;
  moe_decode_group(a, stream);

  SparkKernelArgs s{a, args.x_f32, args.scales, args.xq, nullptr, nullptr, 0};
  quantize_inputs_kernel<<<grid_for(P * (D / kBlock)), kThreads, 0, stream>>>(s);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());

  // Gate and up products of q, through the down kernels: "down" [rows, width = D] times xq.
  MoeExpertArgs gu = a;
  gu.h = args.xq;
  gu.width = D;
  if (args.quant) {
    gu.hidden = W;
    gu.y = args.gu;
    moe_decode_down_quantized(gu, args.quant->gate, stream);
    gu.y = args.gu + P * W;
    moe_decode_down_quantized(gu, args.quant->up, stream);
    s.g = args.gu;
    s.u = args.gu + P * W;
    s.stride = W;
  } else {
    gu.hidden = 2 * W;  // gate rows then up rows: one [2W, D] operand
    gu.down = a.gate_up;
    gu.y = args.gu;
    moe_decode_down(gu, stream);
    s.g = args.gu;
    s.u = args.gu + W;
    s.stride = 2 * W;
  }
  swiglu_quantize_kernel<<<grid_for(P * (W / kBlock)), kThreads, 0, stream>>>(s);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());

  if (args.quant)
    moe_decode_down_quantized(a, args.quant->down, stream);
  else
    moe_decode_down(a, stream);
  scale_outputs_kernel<<<grid_for(P * D), kThreads, 0, stream>>>(s);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());

  if (shared) {
    rows_times(*args.shared_gate, a.x, T, a.shared_gu, stream);
    rows_times(*args.shared_up, a.x, T, a.shared_gu + T * W, stream);
    shared_swiglu_kernel<<<grid_for(T * W), kThreads, 0, stream>>>(a);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
    rows_times(*args.shared_down, a.shared_h, T, a.shared_y, stream);
    // Never read: it tells the combine to add shared_y.
    a.shared_gate_up = static_cast<const uint16_t*>(args.shared_gate->data);
  }
  moe_decode_combine(a, stream);
}

}  // namespace sparkglm::cuda
