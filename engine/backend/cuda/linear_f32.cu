#include "engine/backend/cuda/linear_f32.h"

#include "engine/backend/cuda/lane_linear.cuh"

namespace sparkglm::cuda {

void linear_f32(const float* x, int64_t m, const float* w, int64_t n, int64_t k, float* y,
                cudaStream_t stream) {
  const lane_linear::Params p{x, k, 0, w, 0, y, nullptr, n, 0, m, n, k};
  lane_linear::run<float>(p, 1, stream);
}

}  // namespace sparkglm::cuda
