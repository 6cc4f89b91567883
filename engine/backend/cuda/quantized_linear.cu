#include "engine/backend/cuda/quantized_linear.h"

#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

// Warps per block: 4, so that a small weight (a routed expert's 2048 rows: 128 blocks) still
// spreads over the H200's 132 SMs.
constexpr int kWarps = 4;
constexpr int kChunk = 16;  // values of a W row per lane step (one NVFP4 scale block)

struct GemvArgs {
  const uint16_t* x;  // [m, cols] BF16
  int64_t m;
  QuantizedWeight w;
  float* y;  // [m, rows]
};

// 8 bytes of the weight stream, not kept in L1 (each byte is read once).
__device__ __forceinline__ uint2 load_stream8(const void* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// core/dtype.h's e8m0_to_f32: 2^(e - 127), code 0 the FP32 subnormal 2^-127, 0xff NaN.
__device__ __forceinline__ float e8m0_to_f32_dev(uint32_t e) {
  return e == 0xffu ? __uint_as_float(0x7fc00000u)
                    : (e == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(e << 23));
}

// core/dtype.h's e2m1_to_f32 on the low 4 bits: magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the
// sign (so 0x8 is -0, as on the CPU).
__device__ __forceinline__ float e2m1_to_f32_dev(uint32_t nibble) {
  const uint32_t exp = (nibble >> 1) & 3u, man = nibble & 1u;
  const uint32_t mag = exp == 0 ? (man ? 0x3f000000u : 0u) : (((exp + 126u) << 23) | (man << 22));
  return __uint_as_float(mag | ((nibble & 8u) << 28));
}

// One lane's raw chunk of one W row: 16 values and what scales them.
template <QuantFormat F>
struct RawChunk {
  uint4 v;  // 16 E4M3
  float s;  // the chunk's scale, already FP32 (E8M0 or scale_inv)
};
template <>
struct RawChunk<QuantFormat::kNvfp4> {
  uint2 v;     // 16 E2M1
  uint32_t s;  // the E4M3 block scale code
};

template <QuantFormat F>
__device__ __forceinline__ RawChunk<F> load_chunk(const QuantizedWeight& w, int64_t o, int64_t c) {
  RawChunk<F> r;
  if constexpr (F == QuantFormat::kNvfp4) {
    r.v = load_stream8(w.data + o * (w.cols / 2) + c * (kChunk / 2));
    r.s = __ldg(w.scale + o * (w.cols / 16) + c);
  } else {
    r.v = load_stream(w.data + o * w.cols + c * kChunk);
    if constexpr (F == QuantFormat::kMxfp8) {
      r.s = e8m0_to_f32_dev(__ldg(w.scale + o * (w.cols / 32) + c / 2));
    } else {
      const int64_t scale_cols = (w.cols + 127) / 128;
      r.s = __ldg(w.scale_inv + (o / 128) * scale_cols + c / (128 / kChunk));
    }
  }
  return r;
}

// The chunk's 16 weights, each with dequantize_linear's FP32 bits (weight_formats.cpp): the
// products are rounded exactly where the CPU rounds them (--fmad=false keeps them unfused).
template <QuantFormat F>
__device__ __forceinline__ void dequantize(const RawChunk<F>& r, float g, float* f) {
  if constexpr (F == QuantFormat::kNvfp4) {
    const float block = e4m3_to_f32(uint8_t(r.s));
    const uint32_t u[2] = {r.v.x, r.v.y};
#pragma unroll
    for (int e = 0; e < kChunk; ++e) {
      const uint32_t nibble = (u[e / 8] >> (4 * (e % 8))) & 0xfu;  // low nibble = even column
      f[e] = __fmul_rn(__fmul_rn(e2m1_to_f32_dev(nibble), block), g);
    }
  } else {
    const uint32_t u[4] = {r.v.x, r.v.y, r.v.z, r.v.w};
#pragma unroll
    for (int e = 0; e < kChunk; ++e)
      f[e] = __fmul_rn(e4m3_to_f32(uint8_t(u[e / 4] >> (8 * (e % 4)))), r.s);
  }
}

// Grid: ceil(rows / (kWarps * kR)) blocks of kWarps warps; warp w of block b takes W rows
// (b * kWarps + w) * kR .. + kR - 1 against all m <= kMt x rows (quantized_linear.h).
template <QuantFormat F, int kMt, int kR>
__global__ void __launch_bounds__(kWarps * 32)
    quantized_gemv_kernel(const __grid_constant__ GemvArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t o0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kR;
  const int64_t n = a.w.rows;
  if (o0 >= n) return;
  const int have = int(n - o0 < kR ? n - o0 : kR);
  const int mt = int(a.m);
  const int64_t chunks = a.w.cols / kChunk;

  float acc[kR][kMt];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int i = 0; i < kMt; ++i) acc[r][i] = 0.0f;

#pragma unroll 2
  for (int64_t c = lane; c < chunks; c += 32) {
    RawChunk<F> raw[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      // A missing W row (rows not a multiple of kR) repeats the last one; its sums are not stored.
      raw[r] = load_chunk<F>(a.w, o0 + (r < have ? r : have - 1), c);
    }
    float wf[kR][kChunk];
#pragma unroll
    for (int r = 0; r < kR; ++r) dequantize<F>(raw[r], a.w.global_scale, wf[r]);
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      if (i >= mt) break;
      const uint4* xp = reinterpret_cast<const uint4*>(a.x + int64_t(i) * a.w.cols + c * kChunk);
      const uint4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
      const uint32_t u[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float xf[kChunk];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        xf[2 * e] = __uint_as_float(u[e] << 16);
        xf[2 * e + 1] = __uint_as_float(u[e] & 0xffff0000u);
      }
#pragma unroll
      for (int r = 0; r < kR; ++r)
#pragma unroll
        for (int e = 0; e < kChunk; ++e) acc[r][i] = fmaf(wf[r][e], xf[e], acc[r][i]);
    }
  }
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      if (i >= mt) break;  // uniform across the warp, so every lane still joins the shuffles
      const float s = warp_sum(acc[r][i]);
      if (lane == (r * kMt + i) % 32 && r < have) a.y[int64_t(i) * n + o0 + r] = s;
    }
}

template <QuantFormat F, int kMt>
void launch(const GemvArgs& a, cudaStream_t stream) {
  // Fewer W rows per warp for wide batches keeps the accumulators (kR * kMt) in registers.
  constexpr int kR = kMt <= 8 ? 4 : 2;
  const int64_t per_block = int64_t(kWarps) * kR;
  const unsigned blocks = unsigned((a.w.rows + per_block - 1) / per_block);
  quantized_gemv_kernel<F, kMt, kR><<<blocks, kWarps * 32, 0, stream>>>(a);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <QuantFormat F>
void launch_rows(const GemvArgs& a, cudaStream_t stream) {
  // The template width only bounds the loops over x rows; every output's arithmetic is the same.
  if (a.m == 1) {
    launch<F, 1>(a, stream);
  } else if (a.m == 2) {
    launch<F, 2>(a, stream);
  } else if (a.m <= 4) {
    launch<F, 4>(a, stream);
  } else if (a.m <= 8) {
    launch<F, 8>(a, stream);
  } else if (a.m <= 16) {
    launch<F, 16>(a, stream);
  } else {
    launch<F, 32>(a, stream);
  }
}

bool aligned(const void* p, uintptr_t to) {
  return reinterpret_cast<uintptr_t>(p) % to == 0;
}

}  // namespace

const char* quant_format_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::kNvfp4:
      return "NVFP4";
    case QuantFormat::kMxfp8:
      return "MXFP8";
    case QuantFormat::kFp8Block:
      return "FP8 block";
  }
  return "unknown";
}

double QuantizedWeight::bytes() const {
  const double values = double(rows) * double(cols);
  switch (format) {
    case QuantFormat::kNvfp4:
      return values / 2 + values / 16 + 4;
    case QuantFormat::kMxfp8:
      return values + values / 32;
    case QuantFormat::kFp8Block:
      return values + 4.0 * double((rows + 127) / 128) * double((cols + 127) / 128);
  }
  return 0;
}

const char* quantized_weight_problem(const QuantizedWeight& w) {
  if (w.rows <= 0 || w.cols <= 0) return "rows and cols must be positive";
  if (w.cols % kChunk != 0) return "cols must be a multiple of 16";
  if (!w.data) return "no data";
  switch (w.format) {
    case QuantFormat::kNvfp4:
      if (!w.scale) return "NVFP4 needs its E4M3 block scales";
      if (!aligned(w.data, 8)) return "NVFP4 data must be 8-byte aligned";
      return "";
    case QuantFormat::kMxfp8:
      if (w.cols % 32 != 0) return "MXFP8 needs cols a multiple of 32";
      if (!w.scale) return "MXFP8 needs its E8M0 scales";
      if (!aligned(w.data, 16)) return "MXFP8 data must be 16-byte aligned";
      return "";
    case QuantFormat::kFp8Block:
      if (!w.scale_inv) return "FP8 block needs its scale_inv";
      if (!aligned(w.data, 16)) return "FP8 block data must be 16-byte aligned";
      return "";
  }
  return "unknown format";
}

void quantized_gemv(const uint16_t* x, int64_t m, const QuantizedWeight& w, float* y,
                    cudaStream_t stream) {
  const std::string problem = quantized_weight_problem(w);
  if (!problem.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string("quantized_gemv: ") + quant_format_name(w.format) + " weight [" +
                    std::to_string(w.rows) + ", " + std::to_string(w.cols) + "]: " + problem);
  }
  if (m < 0 || m > kQuantGemvMaxRows || (m > 0 && (!x || !aligned(x, 16) || !y))) {
    throw Error(ErrorKind::kInvalidArgument,
                "quantized_gemv: needs 0 <= m <= 32 decode rows (got " + std::to_string(m) +
                    "), x 16-byte aligned and y");
  }
  if (m == 0) return;
  const GemvArgs a{x, m, w, y};
  switch (w.format) {
    case QuantFormat::kNvfp4:
      launch_rows<QuantFormat::kNvfp4>(a, stream);
      break;
    case QuantFormat::kMxfp8:
      launch_rows<QuantFormat::kMxfp8>(a, stream);
      break;
    case QuantFormat::kFp8Block:
      launch_rows<QuantFormat::kFp8Block>(a, stream);
      break;
  }
}

}  // namespace sparkglm::cuda
