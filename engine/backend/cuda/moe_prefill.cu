#include "engine/backend/cuda/moe_prefill.h"

#include <cstdint>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/grouped_gemm.h"
#include "engine/backend/cuda/moe_prefill_quant.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr unsigned kFull = 0xffffffffu;

// The workspace, carved in a fixed order; every piece starts on 256 bytes. Grouped rows: the
// routed (token, rank) pairs by expert, then the shared expert's T rows as group E.
struct Layout {
  int32_t* counts;          // [E]
  int32_t* offsets;         // [E + 2] first grouped row of each group, then the total
  int32_t* tile_offsets;    // [E + 2] grouped_gemm_plan
  int32_t* slot;            // [T * k] grouped row of each pair (-1: empty slot)
  int32_t* token_of_row;    // [T * k + T]
  const uint16_t** tables;  // [2E] expert pointers when the caller gives host lists only
  uint16_t* h;              // [T * k + T, W] SwiGLU outputs
  float* y;                 // [T * k + T, D] expert outputs
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
  const size_t R = size_t(T * k + T);
  l.counts = static_cast<int32_t*>(take(size_t(E) * 4));
  l.offsets = static_cast<int32_t*>(take(size_t(E + 2) * 4));
  l.tile_offsets = static_cast<int32_t*>(take(size_t(E + 2) * 4));
  l.slot = static_cast<int32_t*>(take(size_t(T * k) * 4));
  l.token_of_row = static_cast<int32_t*>(take(R * 4));
  l.tables = static_cast<const uint16_t**>(take(size_t(2 * E) * sizeof(void*)));
  l.h = static_cast<uint16_t*>(take(R * size_t(W) * 2));
  l.y = static_cast<float*>(take(R * size_t(D) * 4));
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

// Grid: E + 1 blocks of one warp. Expert e's pairs take rows offsets[e] + 0, 1, ... in pair order
// (token order, then rank), which is cpu::moe_forward's grouping; block E gives the shared
// expert's `shared_rows` rows (token t at offsets[E] + t) after them and writes the total.
__global__ void fill_kernel(const int32_t* experts, int64_t pairs, int top_k, int n_experts,
                            const int32_t* counts, int32_t shared_rows, int32_t* offsets,
                            int32_t* slot, int32_t* token_of_row) {
  const int e = int(blockIdx.x), lane = int(threadIdx.x);
  int32_t start = 0;
  for (int j = lane; j < e; j += 32) start += counts[j];  // block E: j < E, every expert
  for (int m = 16; m > 0; m >>= 1) start += __shfl_xor_sync(kFull, start, m);
  if (lane == 0) offsets[e] = start;
  if (e == n_experts) {
    if (lane == 0) offsets[e + 1] = start + shared_rows;
    for (int32_t t = lane; t < shared_rows; t += 32) token_of_row[start + t] = t;
    return;
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

// Grid: T. out[t] = sum over ranks in order (empty slots skipped) of w * y, then + the shared
// expert's row (*shared_first + t; null: none).
__global__ void __launch_bounds__(256)
    combine_kernel(const float* y, const int32_t* slot, const float* weights, int top_k,
                   const int32_t* shared_first, int64_t hidden, float* out) {
  const int64_t t = blockIdx.x;
  const float* ys = shared_first ? y + (int64_t(*shared_first) + t) * hidden : nullptr;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float o = 0.0f;
    for (int r = 0; r < top_k; ++r) {
      const int32_t row = slot[t * top_k + r];
      if (row >= 0) o += weights[t * top_k + r] * y[int64_t(row) * hidden + d];
    }
    if (ys) o += ys[d];
    out[t * hidden + d] = o;
  }
}

}  // namespace

size_t moe_prefill_workspace_bytes(int64_t tokens, int top_k, int n_experts, int64_t hidden,
                                   int64_t width) {
  return carve(nullptr, tokens, top_k, n_experts, hidden, width).bytes;
}

void moe_experts_prefill(const MoePrefillArgs& a, Gemm&, cudaStream_t stream) {
  const int E = a.n_experts;
  const bool quant = a.quant != nullptr;
  if (a.hidden % 8 != 0 || a.width % 8 != 0 || a.top_k <= 0 || E <= 0 ||
      (!quant && !a.device_gate_up && int64_t(a.gate_up.size()) != E) ||
      (!quant && !a.device_down && int64_t(a.down.size()) != E) ||
      (!quant && (a.shared_gate_up != nullptr) != (a.shared_down != nullptr)))
    throw Error(ErrorKind::kInvalidArgument,
                "moe_experts_prefill: hidden and width must be multiples of 8, top_k > 0, "
                "gate_up / down must hold n_experts (" +
                    std::to_string(E) +
                    ") pointers unless their device arrays are given, and the shared expert "
                    "needs both projections");
  if (a.tokens <= 0) return;
  const int64_t T = a.tokens, D = a.hidden, W = a.width, P = T * a.top_k;
  if (P + T > int64_t(0x7fffffff))
    throw Error(ErrorKind::kInvalidArgument, "moe_experts_prefill: too many rows for int32");
  const Layout l = carve(a.workspace, T, a.top_k, E, D, W);
  const bool shared = quant ? a.quant->shared_gate != nullptr : a.shared_gate_up != nullptr;
  const int32_t shared_rows = shared ? int32_t(T) : 0;

  // Host lists only (tests, G1): their pointers go to the workspace, a stream-ordered copy.
  const uint16_t* const* gate_up = a.device_gate_up;
  const uint16_t* const* down = a.device_down;
  if (!gate_up && !quant) {
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(l.tables, a.gate_up.data(), size_t(E) * sizeof(void*),
                                        cudaMemcpyHostToDevice, stream));
    gate_up = l.tables;
  }
  if (!down && !quant) {
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(l.tables + E, a.down.data(), size_t(E) * sizeof(void*),
                                        cudaMemcpyHostToDevice, stream));
    down = l.tables + E;
  }

  count_kernel<<<unsigned(E), 32, 0, stream>>>(a.experts, P, l.counts);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  fill_kernel<<<unsigned(E + 1), 32, 0, stream>>>(a.experts, P, a.top_k, E, l.counts, shared_rows,
                                                  l.offsets, l.slot, l.token_of_row);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());

  // Row tiles of 128 once the experts average 64 rows or more (fewer tiles, more work per shared-
  // memory byte), else of 64 (less padding in the many small groups of a short chunk). A row's
  // result is the same with either.
  GroupedGemmArgs g;
  g.groups = E + 1;
  g.tile_rows = P >= 64 * int64_t(E) ? 128 : 64;
  g.offsets = l.offsets;
  g.tile_offsets = l.tile_offsets;
  g.max_rows = P + shared_rows;
  g.w_count = E;
  if (quant) {
    MoePrefillQuantGemms q;
    q.n_experts = E;
    q.hidden = D;
    q.width = W;
    q.clamp_limit = a.clamp_limit;
    q.tile_rows = g.tile_rows;
    q.pairs = P;
    q.shared_rows = shared_rows;
    q.x = a.x;
    q.counts = l.counts;
    q.offsets = l.offsets;
    q.token_of_row = l.token_of_row;
    q.h = l.h;
    q.y = l.y;
    moe_prefill_quant_gemms(q, *a.quant, a.quant_scratch, a.quant_chunk, stream);
  } else {
    grouped_gemm_plan(l.offsets, g.groups, g.tile_rows, l.tile_offsets, stream);

    // gate_up [2W, D] with the clamped SwiGLU on the way out: h = [rows, W] BF16.
    g.a = a.x;
    g.a_rows = l.token_of_row;
    g.w = gate_up;
    g.w_last = a.shared_gate_up;
    g.n = W;
    g.k = D;
    grouped_gemm_swiglu(g, a.clamp_limit, l.h, stream);
    // down [D, W]: y = [rows, D] FP32.
    g.a = l.h;
    g.a_rows = nullptr;
    g.w = down;
    g.w_last = a.shared_down;
    g.n = D;
    g.k = W;
    grouped_gemm(g, l.y, stream);
  }

  combine_kernel<<<unsigned(T), 256, 0, stream>>>(l.y, l.slot, a.weights, a.top_k,
                                                  shared ? l.offsets + E : nullptr, D, a.out);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
