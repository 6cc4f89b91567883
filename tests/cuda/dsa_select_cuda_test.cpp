// The device selection of attended positions (dsa_select) against cpu::select_attended, exactly:
// random scores, heavy ties (few distinct values), NaN, -0 next to +0, fewer valid pools than
// topk, and the largest context the kernel serves.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cpu/dsa_indexer.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;

constexpr int kTopk = 512;

void check_rows(const std::vector<int32_t>& positions, const std::vector<float>& scores,
                int64_t stride) {
  const int64_t rows = int64_t(positions.size());
  const int64_t out_stride = kTopk * 4 + 3;
  auto d_scores = cuda_test::to_device(scores);
  auto d_pos = cuda_test::to_device(positions);
  cuda::DeviceBuffer d_out(size_t(rows * out_stride) * 4), d_counts(size_t(rows) * 4);
  cuda::dsa_select(static_cast<const float*>(d_scores.data()), stride,
                   static_cast<const int32_t*>(d_pos.data()), rows, kTopk,
                   static_cast<int32_t*>(d_out.data()), out_stride,
                   static_cast<int32_t*>(d_counts.data()), nullptr);
  const auto out = cuda_test::to_host<int32_t>(d_out, size_t(rows * out_stride));
  const auto counts = cuda_test::to_host<int32_t>(d_counts, size_t(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int t = positions[size_t(r)];
    const std::vector<float> row(scores.begin() + r * stride, scores.begin() + (r + 1) * stride);
    const std::vector<int32_t> want = cpu::select_attended(row, t, 4, kTopk);
    ASSERT_EQ(counts[size_t(r)], int32_t(want.size())) << "row " << r;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(out[size_t(r * out_stride) + i], want[i]) << "row " << r << " entry " << i;
  }
}

TEST(CudaDsaSelect, EqualsTheCpuSelectionOnRandomTiedAndNanScores) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t stride = cuda::kIndexMaxPools;
  std::vector<int32_t> positions = {65535, 65534, 40000, 8191, 2051, 2052, 30001, 65535};
  std::vector<float> scores(positions.size() * size_t(stride));
  for (size_t r = 0; r < positions.size(); ++r) {
    const auto u = cuda_test::uniform(0xd5a0 + r, size_t(stride), 0.0f, 1.0f);
    for (int64_t p = 0; p < stride; ++p) {
      float v = u[size_t(p)];
      if (r == 1) v = std::round(v * 4.0f) / 4.0f;  // 9 distinct values: ties everywhere
      if (r == 2 && p % 5 == 0) v = std::nanf("");  // a NaN in every fifth pool
      if (r == 6) v = (p % 2) ? 0.0f : -0.0f;       // only zeros of both signs
      if (r == 7 && p % 3 != 0) v = std::nanf("");  // two pools in three are NaN
      scores[r * size_t(stride) + size_t(p)] = v;
    }
  }
  // Row 7 keeps valid scores only in pools below 1200 (400 of them, fewer than topk): every
  // valid pool is chosen.
  for (int64_t p = 1200; p < stride; ++p) scores[7 * size_t(stride) + size_t(p)] = std::nanf("");
  check_rows(positions, scores, stride);
}

// Rows longer than the kernel keeps in shared memory read their scores from global memory: the
// same choices, up to the deepest context (1,048,575: 262,143 pools), with ties and NaN.
TEST(CudaDsaSelect, LongRowsBeyondSharedMemoryChooseAsTheCpuDoes) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t stride = cuda::kIndexMaxPools;
  const std::vector<int32_t> positions = {1048575, 1048575, 500000, 65539, 65540, 1048573};
  std::vector<float> scores(positions.size() * size_t(stride));
  for (size_t r = 0; r < positions.size(); ++r) {
    const auto u = cuda_test::uniform(0x10a0 + r, size_t(stride), 0.0f, 1.0f);
    for (int64_t p = 0; p < stride; ++p) {
      float v = u[size_t(p)];
      if (r == 1) v = std::round(v * 64.0f) / 64.0f;  // 129 distinct values: ties at the cut
      if (r == 2 && p % 7 == 0) v = std::nanf("");
      scores[r * size_t(stride) + size_t(p)] = v;
    }
  }
  check_rows(positions, scores, stride);
}

}  // namespace
}  // namespace sparkglm
