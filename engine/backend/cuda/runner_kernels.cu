#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/backend/cuda/runner_kernels.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return int(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

// The CPU's silu: x / (1 + e^-x).
__device__ float silu(float x) {
  return x / (1.0f + expf(-x));
}

__global__ void swiglu_kernel(const float* gu, int64_t rows, int64_t width, float limit,
                              uint16_t* h) {
  pdl_trigger();  // the down projection after it may start loading its weights
  pdl_wait();     // gu of the kernel ahead
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / width, j = i % width;
    float g = gu[t * 2 * width + j], u = gu[t * 2 * width + width + j];
    if (limit > 0.0f) {
      g = g < limit ? g : (g != g ? g : limit);  // min that keeps a NaN
      u = u < -limit ? -limit : (u > limit ? limit : u);
    }
    h[i] = f32_to_bf16_bits(silu(g) * u);
  }
}

__global__ void gather_kernel(const float* src, const int32_t* index, int64_t n, int64_t width,
                              float* dst) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * width;
       i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[int64_t(index[i / width]) * width + i % width];
}

__global__ void take_kernel(const int32_t* from, const int32_t* picks, int64_t rows,
                            int32_t* tokens) {
  pdl_wait();
  pdl_trigger();
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows || from[r] < 0) return;
  const int32_t t = picks[from[r]];
  tokens[r] = t < 0 ? 0 : t;
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = x[i] + y[i];
}

__global__ void concat_kernel(const float* a, const float* b, int64_t rows, int64_t d,
                              uint16_t* out) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * 2 * d;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / (2 * d), j = i % (2 * d);
    out[i] = f32_to_bf16_bits(j < d ? a[t * d + j] : b[t * d + j - d]);
  }
}

}  // namespace

void swiglu_rows(const float* gu, int64_t rows, int64_t width, float limit, uint16_t* h,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  launch_dependent(swiglu_kernel, blocks_for(rows * width), kThreads, 0, stream, gu, rows, width,
                   limit, h);
}

void gather_rows(const float* src, const int32_t* index, int64_t n, int64_t width, float* dst,
                 cudaStream_t stream) {
  if (n <= 0) return;
  launch_dependent(gather_kernel, blocks_for(n * width), kThreads, 0, stream, src, index, n, width,
                   dst);
}

void take_picked_tokens(const int32_t* from, const int32_t* picks, int64_t rows, int32_t* tokens,
                        cudaStream_t stream) {
  if (rows <= 0) return;
  launch_dependent(take_kernel, blocks_for(rows), kThreads, 0, stream, from, picks, rows, tokens);
}

void add_in_place(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch_dependent(add_kernel, blocks_for(n), kThreads, 0, stream, x, y, n);
}

void concat_bf16(const float* a, const float* b, int64_t rows, int64_t d, uint16_t* out,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  launch_dependent(concat_kernel, blocks_for(rows * 2 * d), kThreads, 0, stream, a, b, rows, d,
                   out);
}

}  // namespace sparkglm::cuda
