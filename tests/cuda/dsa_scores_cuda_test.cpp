// dsa_pool_scores: steps of four or more rows take the tiled kernel, single rows (decode) the
// per-row one; both must give every score the same bits (one FMA chain per logit over increasing
// c, heads added in increasing order), so a row's selection does not depend on its neighbours.
// The per-row kernel is checked against the CPU by the G1 dsa rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/dsa_indexer.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/core/thread_pool.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
constexpr int kHeads = 32, kDim = 128;

std::vector<float> scores_of(const std::vector<float>& q, const std::vector<float>& w,
                             const std::vector<float>& pooled, int64_t rows, int64_t pools,
                             bool one_row_at_a_time) {
  auto dq = cuda_test::to_device(q), dw = cuda_test::to_device(w),
       dp = cuda_test::to_device(pooled);
  cuda::DeviceBuffer ds(size_t(rows * pools) * 4);
  auto* out = static_cast<float*>(ds.data());
  const auto* qp = static_cast<const float*>(dq.data());
  const auto* wp = static_cast<const float*>(dw.data());
  if (one_row_at_a_time) {
    for (int64_t r = 0; r < rows; ++r)
      cuda::dsa_pool_scores(qp + r * kHeads * kDim, wp + r * kHeads, 1, kHeads,
                            static_cast<const float*>(dp.data()), pools, out + r * pools, nullptr);
  } else {
    cuda::dsa_pool_scores(qp, wp, rows, kHeads, static_cast<const float*>(dp.data()), pools, out,
                          nullptr);
  }
  return cuda_test::to_host<float>(ds, size_t(rows * pools));
}

TEST(CudaDsaScores, TiledStepsGiveEachRowTheBitsOfItsOwnLaunch) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (auto [rows, pools] :
       {std::pair<int64_t, int64_t>{4, 128}, {5, 1000}, {37, 2051}, {256, 300}}) {
    auto q = cuda_test::uniform(11 + uint64_t(rows), size_t(rows * kHeads * kDim), 0.0f, 1.0f);
    auto w = cuda_test::uniform(12 + uint64_t(rows), size_t(rows * kHeads), 0.0f, 1.0f);
    auto pooled = cuda_test::uniform(13 + uint64_t(pools), size_t(pools * kDim), 0.0f, 1.0f);
    q[5] = std::nanf("");  // a NaN logit reaches its pool's score in both kernels
    const auto tiled = scores_of(q, w, pooled, rows, pools, false);
    const auto single = scores_of(q, w, pooled, rows, pools, true);
    ASSERT_EQ(tiled.size(), single.size());
    EXPECT_EQ(std::memcmp(tiled.data(), single.data(), tiled.size() * sizeof(float)), 0)
        << rows << " rows x " << pools << " pools";
    // And the CPU's scores, within float rounding of a different summation order.
    ThreadPool pool(1);
    const auto cpu = cpu::index_pool_scores(q.data() + kHeads * kDim, w.data() + kHeads, kHeads,
                                            kDim, pooled.data(), pools, pool);
    for (int64_t p = 0; p < pools; ++p)
      EXPECT_NEAR(tiled[size_t(pools + p)], cpu[size_t(p)], 1e-4 * (1 + std::fabs(cpu[size_t(p)])));
  }
}

}  // namespace
}  // namespace sparkglm
