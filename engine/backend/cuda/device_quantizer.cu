#include "engine/backend/cuda/device_quantizer.h"

#include <algorithm>
#include <cstring>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/fp4_rounding.cuh"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/stored_weight_value.cuh"
#include "engine/model/weight_quantizer.h"
#include "tinyglm/dummy_hash.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kAmaxBlocks = 1024;
constexpr int kFp8Block = 128;
constexpr int kMxBlock = 32;
constexpr int kNvBlock = 16;
constexpr double kE4m3Max = 448.0;

// The BF16 dummy value the CPU quantizer reads (tinyglm/dummy_weights.cpp stores it as BF16).
__device__ __forceinline__ float dummy_at(const DummyMatrix& m, int64_t i) {
  return bf16_bits_to_f32(
      f32_to_bf16_bits(dummy::value(m.key, uint64_t(i), m.center, m.half_width)));
}

int grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return int(blocks < 65536 ? blocks : 65536);
}

// One thread per 32-value block of a row.
__global__ void mxfp8_kernel(const __grid_constant__ DummyMatrix m, uint8_t* values,
                             uint8_t* scale) {
  const int64_t blocks = m.rows * (m.cols / kMxBlock);
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < blocks;
       b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t first = b * kMxBlock;  // row-major: block b of the flat tensor
    float amax_f = 0.0f;
    for (int i = 0; i < kMxBlock; ++i) amax_f = fmaxf(amax_f, fabsf(dummy_at(m, first + i)));
    const double amax = amax_f;
    int k = 0;
    if (amax > 0.0) {
      k = ilogb(amax) - 8;
      while (ldexp(kE4m3Max, k) < amax) ++k;
      while (ldexp(kE4m3Max, k - 1) >= amax) --k;
      k = k < -127 ? -127 : (k > 127 ? 127 : k);
    }
    scale[b] = uint8_t(k + 127);
    for (int i = 0; i < kMxBlock; ++i)
      values[first + i] = fp4::round_e4m3(ldexp(double(dummy_at(m, first + i)), -k));
  }
}

// One CTA of kThreads per 128x128 block: amax (max is exact in any order), then the elements.
__global__ void fp8_block_kernel(const __grid_constant__ DummyMatrix m, uint8_t* values,
                                 float* scale_inv) {
  __shared__ float warp_amax[kThreads / 32];
  const int64_t sc = (m.cols + kFp8Block - 1) / kFp8Block;
  const int64_t br = blockIdx.x / sc, bc = blockIdx.x % sc;
  const int64_t r0 = br * kFp8Block, c0 = bc * kFp8Block;
  const int64_t nr = m.rows - r0 < kFp8Block ? m.rows - r0 : kFp8Block;
  const int64_t nc = m.cols - c0 < kFp8Block ? m.cols - c0 : kFp8Block;
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < nr * nc; i += blockDim.x)
    amax = fmaxf(amax, fabsf(dummy_at(m, (r0 + i / nc) * m.cols + c0 + i % nc)));
  amax = warp_max(amax);
  if ((threadIdx.x & 31) == 0) warp_amax[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_amax[w]);
  const float s = amax > 0.0f ? amax / float(kE4m3Max) : 1.0f;  // FP32 division, as on the CPU
  if (threadIdx.x == 0) scale_inv[blockIdx.x] = s;
  for (int64_t i = threadIdx.x; i < nr * nc; i += blockDim.x) {
    const int64_t at = (r0 + i / nc) * m.cols + c0 + i % nc;
    values[at] = fp4::round_e4m3(double(dummy_at(m, at)) / double(s));
  }
}

// The FP32 values a quantizer reads: a preset's dummy tensor, or a projection already on the
// device (spark's conversions), each element as the CPU reads it.
struct DummySource {
  DummyMatrix m;
  __device__ float at(int64_t i) const { return dummy_at(m, i); }
};

struct LinearSource {
  int64_t rows = 0, cols = 0;
  const void* dense = nullptr;  // BF16 or FP32 [rows, cols], or null: `q`
  bool f32 = false;
  QuantizedWeight q;
  __device__ float at(int64_t i) const {
    if (dense)
      return f32 ? static_cast<const float*>(dense)[i]
                 : bf16_bits_to_f32(static_cast<const uint16_t*>(dense)[i]);
    return stored_weight_value(q, i / cols, i % cols);
  }
};

// The tensor's amax as FP32 bits: non-negative floats order as their unsigned bits.
template <typename Source>
__global__ void amax_kernel(const __grid_constant__ Source s, int64_t n, unsigned int* amax_bits) {
  float a = 0.0f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    a = fmaxf(a, fabsf(s.at(i)));
  a = warp_max(a);
  if ((threadIdx.x & 31) == 0) atomicMax(amax_bits, __float_as_uint(a));
}

// One thread per 16-value block: weight_quantizer.cpp's nvfp4_block.
template <typename Source>
__global__ void nvfp4_kernel(const __grid_constant__ Source s, int64_t n, float scale_2,
                             uint8_t* packed, uint8_t* scale) {
  const int64_t blocks = n / kNvBlock;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < blocks;
       b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t first = b * kNvBlock;
    float x[kNvBlock];
    for (int i = 0; i < kNvBlock; ++i) x[i] = s.at(first + i);
    uint8_t codes[kNvBlock];
    scale[b] = fp4::nvfp4_block(x, kNvBlock, scale_2, codes);
    for (int i = 0; i < kNvBlock; i += 2)
      packed[(first + i) / 2] = uint8_t(codes[i] | (codes[i + 1] << 4));
  }
}

// quantize_nvfp4 of the n values of `s` (rows of whole blocks): the tensor's amax read back to
// the host (synchronising `stream`), then the blocks. Returns weight_scale_2.
template <typename Source>
float quantize_nvfp4_from(const Source& s, int64_t n, uint8_t* packed, uint8_t* scale,
                          cudaStream_t stream) {
  if (n == 0) return 1.0f;
  DeviceBuffer amax_bits(sizeof(unsigned int));
  SPARKGLM_CUDA_CHECK(cudaMemsetAsync(amax_bits.data(), 0, sizeof(unsigned int), stream));
  // At most kAmaxBlocks blocks: each warp's atomicMax hits one address, so fewer warps are faster.
  amax_kernel<Source><<<std::min(grid_for(n), kAmaxBlocks), kThreads, 0, stream>>>(
      s, n, static_cast<unsigned int*>(amax_bits.data()));
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  unsigned int bits = 0;
  SPARKGLM_CUDA_CHECK(
      cudaMemcpyAsync(&bits, amax_bits.data(), sizeof(bits), cudaMemcpyDeviceToHost, stream));
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  float amax;
  static_assert(sizeof(amax) == sizeof(bits));
  std::memcpy(&amax, &bits, sizeof(amax));
  const float scale_2 = nvfp4_global_scale(amax);  // the CPU's FP32 division
  nvfp4_kernel<Source>
      <<<grid_for(n / kNvBlock), kThreads, 0, stream>>>(s, n, scale_2, packed, scale);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  return scale_2;
}

}  // namespace

void quantize_dummy_mxfp8(const DummyMatrix& m, uint8_t* values, uint8_t* scale,
                          cudaStream_t stream) {
  SPARKGLM_ASSERT(m.cols % kMxBlock == 0, "MXFP8 needs cols divisible by 32");
  const int64_t blocks = m.rows * (m.cols / kMxBlock);
  if (blocks == 0) return;
  mxfp8_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(m, values, scale);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void quantize_dummy_fp8_block(const DummyMatrix& m, uint8_t* values, float* scale_inv,
                              cudaStream_t stream) {
  const int64_t tiles =
      ((m.rows + kFp8Block - 1) / kFp8Block) * ((m.cols + kFp8Block - 1) / kFp8Block);
  if (tiles == 0) return;
  SPARKGLM_ASSERT(tiles < (int64_t(1) << 31), "FP8 block: too many tiles for one grid");
  fp8_block_kernel<<<unsigned(tiles), kThreads, 0, stream>>>(m, values, scale_inv);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

float quantize_dummy_nvfp4(const DummyMatrix& m, uint8_t* packed, uint8_t* scale,
                           cudaStream_t stream) {
  SPARKGLM_ASSERT(m.cols % kNvBlock == 0, "NVFP4 needs cols divisible by 16");
  return quantize_nvfp4_from(DummySource{m}, m.rows * m.cols, packed, scale, stream);
}

float quantize_linear_nvfp4(const Linear& w, uint8_t* packed, uint8_t* scale, cudaStream_t stream) {
  SPARKGLM_ASSERT(w.cols % kNvBlock == 0, "NVFP4 needs cols divisible by 16");
  LinearSource s;
  s.rows = w.rows;
  s.cols = w.cols;
  if (w.quantized()) {
    s.q = quantized_weight(w);
  } else {
    SPARKGLM_ASSERT(w.dtype == DType::kBF16 || w.dtype == DType::kF32,
                    "quantize_linear_nvfp4: a dense source is BF16 or FP32");
    s.dense = w.data;
    s.f32 = w.dtype == DType::kF32;
  }
  return quantize_nvfp4_from(s, w.rows * w.cols, packed, scale, stream);
}

}  // namespace sparkglm::cuda
