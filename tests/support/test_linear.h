#pragma once
// A projection whose storage lives in the test (BF16 weights are the rounded FP32 draws), shared by
// the CPU layer tests.
#include <cstdint>
#include <random>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/model/weights.h"

namespace sparkglm::testing {

struct TestLinear {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  Linear view;
  TestLinear(int64_t rows, int64_t cols, DType dt, float scale, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-scale, scale);
    view = Linear{dt, rows, cols, nullptr};
    if (dt == DType::kBF16) {
      bf16.resize(size_t(rows * cols));
      for (auto& v : bf16) v = f32_to_bf16(u(rng));
      view.data = bf16.data();
    } else {
      f32.resize(size_t(rows * cols));
      for (auto& v : f32) v = u(rng);
      view.data = f32.data();
    }
  }
};

}  // namespace sparkglm::testing
