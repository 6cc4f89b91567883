#include "engine/backend/cuda/moe_prefill.h"

#include <cstdint>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;

// The workspace, carved in a fixed order; every piece starts on 256 bytes.
struct Layout {
  int32_t* counts;        // [E]
  int32_t* offsets;       // [E + 1] first grouped row of each expert, then the total
  int32_t* slot;          // [T * k] grouped row of each pair (-1: empty slot)
  int32_t* token_of_row;  // [T * k]
  uint16_t* xg;           // [T * k, D] gathered inputs
  float* gu;              // [T * k, 2W]
  uint16_t* h;            // [T * k, W]
  float* y;               // [T * k, D]
  float* shared_gu;       // [T, 2W]
  uint16_t* shared_h;     // [T, W]
  float* shared_y;        // [T, D]
  size_t bytes;
};

Layout carve(void* base, int64_t T, int k, int E, int64_t D, int64_t W) {
  Layout l{};
  size_t at = 0;
  auto take = [&](size_t bytes) {
    // Integer arithmetic: the size query carves from a null base.
    void* p = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(base) + at);
    at += (bytes + 255) / 256 * 256;
    return p;
  };
  const size_t P = size_t(T * k);
  l.counts = static_cast<int32_t*>(take(size_t(E) * 4));
  l.offsets = static_cast<int32_t*>(take(size_t(E + 1) * 4));
  l.slot = static_cast<int32_t*>(take(P * 4));
  l.token_of_row = static_cast<int32_t*>(take(P * 4));
  l.xg = static_cast<uint16_t*>(take(P * size_t(D) * 2));
  l.gu = static_cast<float*>(take(P * size_t(2 * W) * 4));
  l.h = static_cast<uint16_t*>(take(P * size_t(W) * 2));
  l.y = static_cast<float*>(take(P * size_t(D) * 4));
  l.shared_gu = static_cast<float*>(take(size_t(T * 2 * W) * 4));
  l.shared_h = static_cast<uint16_t*>(take(size_t(T * W) * 2));
  l.shared_y = static_cast<float*>(take(size_t(T * D) * 4));
  l.bytes = at;
  return l;
}

// Grid: E blocks of one warp. counts[e] = pairs routed to e (ballots over the pairs in order).
__global__ void count_kernel(const int32_t* experts, int64_t pairs, int32_t* counts) {
  const int e = int(blockIdx.x), lane = int(threadIdx.x);
  int32_t n = 0;
  for (int64_t base = 0; base < pairs; base += 32) {
    const int64_t p = base + lane;
    n += __popc(__ballot_sync(kFull, p < pairs && experts[p] == e));
  }
  if (lane == 0) counts[e] = n;
}

// Grid: E blocks of one warp. Expert e's pairs take rows offsets[e] + 0, 1, ... in pair order
// (token order, then rank), which is cpu::moe_forward's grouping.
__global__ void fill_kernel(const int32_t* experts, int64_t pairs, int top_k, int n_experts,
                            const int32_t* counts, int32_t* offsets, int32_t* slot,
                            int32_t* token_of_row) {
  const int e = int(blockIdx.x), lane = int(threadIdx.x);
  int32_t start = 0;
  for (int j = lane; j < e; j += 32) start += counts[j];
  for (int m = 16; m > 0; m >>= 1) start += __shfl_xor_sync(kFull, start, m);
  if (lane == 0) {
    offsets[e] = start;
    if (e == n_experts - 1) offsets[n_experts] = start + counts[e];
  }
  int32_t next = start;
  for (int64_t base = 0; base < pairs; base += 32) {
    const int64_t p = base + lane;
    const int32_t v = p < pairs ? experts[p] : -1;
    const unsigned hit = __ballot_sync(kFull, v == e);
    if (v == e) {
      const int32_t row = next + __popc(hit & ((1u << lane) - 1u));
      slot[p] = row;
      token_of_row[row] = int32_t(p / top_k);
    }
    if (e == 0 && p < pairs && (v < 0 || v >= n_experts)) slot[p] = -1;
    next += __popc(hit);
  }
}

// Grid: T * k; rows past the total exit. xg[row] = x[token_of_row[row]], 16 bytes a thread.
__global__ void __launch_bounds__(128)
    gather_kernel(const uint16_t* x, int64_t hidden, const int32_t* token_of_row,
                  const int32_t* total, uint16_t* xg) {
  const int64_t row = blockIdx.x;
  if (row >= *total) return;
  const uint4* src = reinterpret_cast<const uint4*>(x + int64_t(token_of_row[row]) * hidden);
  uint4* dst = reinterpret_cast<uint4*>(xg + row * hidden);
  for (int64_t i = threadIdx.x; i < hidden / 8; i += blockDim.x) dst[i] = src[i];
}

// cpu::swiglu_forward's activation: std::min / std::clamp's comparisons, so a NaN passes through.
__device__ __forceinline__ float swiglu(float gv, float uv, float limit) {
  if (limit > 0.0f) {
    gv = limit < gv ? limit : gv;
    uv = uv < -limit ? -limit : (limit < uv ? limit : uv);
  }
  return gv / (1.0f + expf(-gv)) * uv;
}

// Grid: rows (those at or past *total exit when total is given). h = SwiGLU(gate, up) as BF16.
__global__ void __launch_bounds__(256)
    swiglu_kernel(const float* gu, int64_t width, const int32_t* total, float limit, uint16_t* h) {
  const int64_t row = blockIdx.x;
  if (total && row >= *total) return;
  const float* g = gu + row * 2 * width;
  for (int64_t n = threadIdx.x; n < width; n += blockDim.x)
    h[row * width + n] = f32_to_bf16_bits(swiglu(g[n], g[width + n], limit));
}

// Grid: T. out[t] = sum over ranks in order (empty slots skipped) of w * y, then + shared.
__global__ void __launch_bounds__(256)
    combine_kernel(const float* y, const int32_t* slot, const float* weights, int top_k,
                   const float* shared_y, int64_t hidden, float* out) {
  const int64_t t = blockIdx.x;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float o = 0.0f;
    for (int r = 0; r < top_k; ++r) {
      const int32_t row = slot[t * top_k + r];
      if (row >= 0) o += weights[t * top_k + r] * y[int64_t(row) * hidden + d];
    }
    if (shared_y) o += shared_y[t * hidden + d];
    out[t * hidden + d] = o;
  }
}

}  // namespace

size_t moe_prefill_workspace_bytes(int64_t tokens, int top_k, int n_experts, int64_t hidden,
                                   int64_t width) {
  return carve(nullptr, tokens, top_k, n_experts, hidden, width).bytes;
}

void moe_experts_prefill(const MoePrefillArgs& a, Gemm& gemm, cudaStream_t stream) {
  const int E = a.n_experts;
  if (a.hidden % 8 != 0 || a.width % 8 != 0 || a.top_k <= 0 || E <= 0 ||
      int64_t(a.gate_up.size()) != E || int64_t(a.down.size()) != E)
    throw Error(ErrorKind::kInvalidArgument,
                "moe_experts_prefill: hidden and width must be multiples of 8, top_k > 0, and "
                "gate_up / down must hold n_experts (" +
                    std::to_string(E) + ") pointers");
  if (a.tokens <= 0) return;
  const int64_t T = a.tokens, D = a.hidden, W = a.width, P = T * a.top_k;
  const Layout l = carve(a.workspace, T, a.top_k, E, D, W);

  count_kernel<<<unsigned(E), 32, 0, stream>>>(a.experts, P, l.counts);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  fill_kernel<<<unsigned(E), 32, 0, stream>>>(a.experts, P, a.top_k, E, l.counts, l.offsets, l.slot,
                                              l.token_of_row);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  gather_kernel<<<unsigned(P), 128, 0, stream>>>(a.x, D, l.token_of_row, l.offsets + E, l.xg);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  std::vector<int32_t> offsets(size_t(E) + 1);
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(offsets.data(), l.offsets, offsets.size() * 4,
                                      cudaMemcpyDeviceToHost, stream));
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream));

  for (int e = 0; e < E; ++e) {
    const int64_t lo = offsets[size_t(e)], n = offsets[size_t(e) + 1] - lo;
    if (n > 0)
      gemm.linear(l.xg + lo * D, n, a.gate_up[size_t(e)], 2 * W, D, l.gu + lo * 2 * W, stream);
  }
  swiglu_kernel<<<unsigned(P), 256, 0, stream>>>(l.gu, W, l.offsets + E, a.clamp_limit, l.h);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  for (int e = 0; e < E; ++e) {
    const int64_t lo = offsets[size_t(e)], n = offsets[size_t(e) + 1] - lo;
    if (n > 0) gemm.linear(l.h + lo * W, n, a.down[size_t(e)], D, W, l.y + lo * D, stream);
  }
  if (a.shared_gate_up) {
    gemm.linear(a.x, T, a.shared_gate_up, 2 * W, D, l.shared_gu, stream);
    swiglu_kernel<<<unsigned(T), 256, 0, stream>>>(l.shared_gu, W, nullptr, a.clamp_limit,
                                                   l.shared_h);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
    gemm.linear(l.shared_h, T, a.shared_down, D, W, l.shared_y, stream);
  }
  combine_kernel<<<unsigned(T), 256, 0, stream>>>(
      l.y, l.slot, a.weights, a.top_k, a.shared_gate_up ? l.shared_y : nullptr, D, a.out);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
