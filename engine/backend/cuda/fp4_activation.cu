#include "engine/backend/cuda/fp4_activation.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/fp4_rounding.cuh"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;

struct RoundTripArgs {
  const float* x;
  int64_t rows, n;
  const float* scale_2;
  float* value;
  uint16_t* q;
};

// One thread per 16-value block of a row.
__global__ void round_trip_kernel(const __grid_constant__ RoundTripArgs a) {
  const int64_t per_row = (a.n + fp4::kNvBlock - 1) / fp4::kNvBlock;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < a.rows * per_row;
       b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = b / per_row, c0 = (b % per_row) * fp4::kNvBlock;
    const int len = int(a.n - c0 < fp4::kNvBlock ? a.n - c0 : fp4::kNvBlock);
    const float s2 = a.scale_2[row];
    float v[fp4::kNvBlock];
    for (int i = 0; i < len; ++i) v[i] = a.x[row * a.n + c0 + i];
    fp4::nvfp4_round_block(v, len, s2);
    for (int i = 0; i < len; ++i) {
      if (a.value) a.value[row * a.n + c0 + i] = v[i] * s2;  // one FP32 rounding, as on the CPU
      if (a.q) a.q[row * a.n + c0 + i] = f32_to_bf16_bits(v[i]);  // exact
    }
  }
}

}  // namespace

void fp4_round_trip_rows(const float* x, int64_t rows, int64_t n, const float* scale_2,
                         float* value, uint16_t* q, cudaStream_t stream) {
  const int64_t blocks = rows * ((n + fp4::kNvBlock - 1) / fp4::kNvBlock);
  if (blocks <= 0) return;
  const int64_t grid = (blocks + kThreads - 1) / kThreads;
  round_trip_kernel<<<unsigned(grid < 65536 ? grid : 65536), kThreads, 0, stream>>>(
      RoundTripArgs{x, rows, n, scale_2, value, q});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
