// linear_f32 (the FP32 router projection) follows cpu::linear's reduction order, so it must equal
// the CPU reference bit for bit at every row count: both the weight-streaming kernel (m <= 32)
// and the tiled one (m > 32), at the router's shape (n 288, k 4096) and at small odd shapes
// (k % 8 != 0 exercises the partial last lane chunk, n and m off the tiles).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/linear_f32.h"
#include "engine/core/thread_pool.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using namespace cuda_test;

size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += std::memcmp(&got[i], &want[i], 4) != 0;
  return bad;
}

TEST(CudaLinearF32, EqualsCpuLinearBitForBitAtEveryRowCount) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  ThreadPool pool(int(std::thread::hardware_concurrency()));
  struct Shape {
    int64_t n, k;
  };
  for (const Shape s : {Shape{288, 4096}, Shape{19, 100}, Shape{3, 12}}) {
    const int64_t max_m = 300;
    auto x = uniform(40, size_t(max_m * s.k), 0.0f, 1.0f);
    const auto w = uniform(41, size_t(s.n * s.k), 0.0f, 0.05f);
    x[0] = -0.0f, x[1] = 0.0f;  // signed zeros take the same path as on the CPU
    auto dx = to_device(x), dw = to_device(w);
    for (int64_t m : {1, 3, 8, 32, 33, 200, 300}) {
      std::vector<float> want(size_t(m * s.n));
      cpu::linear(x.data(), m, Linear{DType::kF32, s.n, s.k, w.data()}, want.data(), pool);
      cuda::DeviceBuffer dy(want.size() * 4);
      SPARKGLM_CUDA_CHECK(cudaMemset(dy.data(), 0xff, dy.bytes()));
      cuda::linear_f32(static_cast<const float*>(dx.data()), m,
                       static_cast<const float*>(dw.data()), s.n, s.k,
                       static_cast<float*>(dy.data()), nullptr);
      const auto got = to_host<float>(dy, want.size());
      EXPECT_EQ(mismatches(got, want), 0u)
          << "m " << m << " n " << s.n << " k " << s.k << " nmse " << nmse(got, want);
    }
  }
}

}  // namespace
}  // namespace sparkglm
