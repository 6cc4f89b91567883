#include "engine/backend/cuda/moe_prefill_quant.h"

#include <algorithm>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/grouped_gemm.h"
#include "engine/backend/cuda/moe_quant_device.cuh"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/scale_codes.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

using moe_quant::ExpertView;

// The scratch, carved in a fixed order; every piece starts on 256 bytes.
struct Scratch {
  const uint16_t** table;  // [2 * chunk]: each slot's gate_up, then each slot's down
  int32_t* tiles;          // [chunk + 2] grouped_gemm_plan's tile offsets
  uint16_t* experts;       // chunk slots of slot_elems BF16: gate_up [2W, D], then down [D, W]
  int64_t slot_elems;
  size_t bytes;
};

Scratch carve(void* base, int chunk, int64_t D, int64_t W) {
  Scratch s{};
  size_t at = 0;
  auto take = [&](size_t bytes) {
    // Integer arithmetic: the size query carves from a null base.
    void* p = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(base) + at);
    at += (bytes + 255) / 256 * 256;
    return p;
  };
  s.table = static_cast<const uint16_t**>(take(size_t(2 * chunk) * sizeof(void*)));
  s.tiles = static_cast<int32_t*>(take(size_t(chunk + 2) * 4));
  s.slot_elems = (3 * W * D + 127) / 128 * 128;  // 256-byte slots
  s.experts = static_cast<uint16_t*>(take(size_t(chunk) * size_t(s.slot_elems) * 2));
  s.bytes = at;
  return s;
}

// Element (r, c) of a [rows, cols] projection: dequantize_linear's FP32 value, rounded as it
// rounds (the products unfused: --fmad=false).
template <QuantFormat F>
__device__ __forceinline__ float dequant_at(const ExpertView& w, int64_t cols, int64_t r,
                                            int64_t c) {
  if constexpr (F == QuantFormat::kNvfp4) {
    const uint32_t byte = w.data[r * (cols / 2) + c / 2];
    const uint32_t nibble = (c & 1) ? byte >> 4 : byte & 0xfu;
    return e2m1_to_f32_dev(nibble) * e4m3_to_f32(w.scale[r * (cols / 16) + c / 16]) *
           w.global_scale;
  } else if constexpr (F == QuantFormat::kMxfp8) {
    return e4m3_to_f32(w.data[r * cols + c]) * e8m0_to_f32_dev(w.scale[r * (cols / 32) + c / 32]);
  } else {
    return e4m3_to_f32(w.data[r * cols + c]) *
           w.scale_inv[(r / 128) * ((cols + 127) / 128) + c / 128];
  }
}

// Grid: (rows, experts). Block y dequantizes expert e0 + y of `op` into slot y of dst (row r of
// block x at dst + y * slot_elems + r * cols), unless that expert has no rows; with op.data null,
// `single` into slot 0.
template <QuantFormat F>
__global__ void __launch_bounds__(256)
    dequant_kernel(MoeQuantOperand op, int e0, const int32_t* counts, ExpertView single,
                   int64_t cols, uint16_t* dst, int64_t slot_elems) {
  ExpertView w = single;
  if (op.data) {
    const int e = e0 + int(blockIdx.y);
    if (counts[e] == 0) return;
    w = moe_quant::view_of(op, e);
  }
  const int64_t r = blockIdx.x;
  uint16_t* out = dst + int64_t(blockIdx.y) * slot_elems + r * cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[c] = f32_to_bf16_bits(dequant_at<F>(w, cols, r, c));
}

// table[i] = slot i's gate_up, table[chunk + i] = its down.
__global__ void table_kernel(const uint16_t** table, uint16_t* experts, int chunk,
                             int64_t slot_elems, int64_t down_at) {
  for (int i = int(threadIdx.x); i < chunk; i += int(blockDim.x)) {
    table[i] = experts + int64_t(i) * slot_elems;
    table[chunk + i] = experts + int64_t(i) * slot_elems + down_at;
  }
}

void dequant_routed(const MoeQuantOperand& op, int e0, int experts, const int32_t* counts,
                    int64_t rows, int64_t cols, uint16_t* dst, int64_t slot_elems,
                    cudaStream_t stream) {
  moe_quant::by_format(op.format, [&](auto f) {
    dequant_kernel<decltype(f)::value><<<dim3(unsigned(rows), unsigned(experts)), 256, 0, stream>>>(
        op, e0, counts, ExpertView{}, cols, dst, slot_elems);
  });
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void dequant_single(const Linear& l, uint16_t* dst, cudaStream_t stream) {
  if (!l.quantized()) {
    SPARKGLM_ASSERT(l.dtype == DType::kBF16, "moe prefill: a dense shared expert must be BF16");
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(dst, l.data, size_t(l.rows * l.cols) * 2,
                                        cudaMemcpyDeviceToDevice, stream));
    return;
  }
  const QuantizedWeight w = quantized_weight(l);
  ExpertView v;
  v.data = w.data;
  v.scale = w.scale;
  v.scale_inv = w.scale_inv;
  v.global_scale = w.global_scale;
  moe_quant::by_format(w.format, [&](auto f) {
    dequant_kernel<decltype(f)::value><<<dim3(unsigned(l.rows), 1), 256, 0, stream>>>(
        MoeQuantOperand{}, 0, nullptr, v, l.cols, dst, 0);
  });
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

size_t moe_prefill_quant_scratch_bytes(int chunk, int64_t hidden, int64_t width) {
  return carve(nullptr, chunk, hidden, width).bytes;
}

void moe_prefill_quant_gemms(const MoePrefillQuantGemms& g, const MoeQuantExperts& q, void* scratch,
                             int chunk, cudaStream_t stream) {
  const int E = g.n_experts;
  const int64_t D = g.hidden, W = g.width;
  if (chunk < 1 || !scratch || reinterpret_cast<uintptr_t>(scratch) % 256 != 0 || E < 1 ||
      !q.gate.data || !q.up.data || !q.down.data ||
      (g.shared_rows > 0 && (!q.shared_gate || !q.shared_up || !q.shared_down)))
    throw Error(ErrorKind::kInvalidArgument,
                "moe_prefill_quant_gemms: needs chunk >= 1, a 256-byte aligned scratch, the "
                "routed operands, and the shared expert's projections when it has rows");
  const Scratch s = carve(scratch, chunk, D, W);
  table_kernel<<<1, 32, 0, stream>>>(s.table, s.experts, chunk, s.slot_elems, 2 * W * D);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());

  GroupedGemmArgs a;
  a.tile_rows = g.tile_rows;
  a.tile_offsets = s.tiles;
  // Groups [first, first + groups) of moe_experts_prefill's grouping, their weights in slots
  // 0 .. groups - 1; they write their own rows of h and y.
  auto run = [&](int first, int groups, int64_t max_rows) {
    a.groups = groups;
    a.offsets = g.offsets + first;
    a.max_rows = max_rows;
    a.w_count = groups;
    grouped_gemm_plan(a.offsets, groups, a.tile_rows, s.tiles, stream);
    a.a = g.x;
    a.a_rows = g.token_of_row;
    a.w = s.table;
    a.n = W;
    a.k = D;
    grouped_gemm_swiglu(a, g.clamp_limit, g.h, stream);
    a.a = g.h;
    a.a_rows = nullptr;
    a.w = s.table + chunk;
    a.n = D;
    a.k = W;
    grouped_gemm(a, g.y, stream);
  };
  for (int e0 = 0; e0 < E; e0 += chunk) {
    const int c = std::min(chunk, E - e0);
    dequant_routed(q.gate, e0, c, g.counts, W, D, s.experts, s.slot_elems, stream);
    dequant_routed(q.up, e0, c, g.counts, W, D, s.experts + W * D, s.slot_elems, stream);
    dequant_routed(q.down, e0, c, g.counts, D, W, s.experts + 2 * W * D, s.slot_elems, stream);
    run(e0, c, g.pairs);
  }
  if (g.shared_rows > 0) {
    dequant_single(*q.shared_gate, s.experts, stream);
    dequant_single(*q.shared_up, s.experts + W * D, stream);
    dequant_single(*q.shared_down, s.experts + 2 * W * D, stream);
    run(E, 1, g.shared_rows);
  }
}

}  // namespace sparkglm::cuda
