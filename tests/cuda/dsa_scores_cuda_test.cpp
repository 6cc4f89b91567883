// dsa_pool_scores: steps of four or more rows take the tiled kernel, single rows (decode) the
// per-row one; both must give every score the same bits (one FMA chain per logit over increasing
// c, heads added in increasing order), so a row's selection does not depend on its neighbours.
// The per-row kernel is checked against the CPU by the G1 dsa rows. Pools kept in pages (each
// pooled once, when its fourth token is stored) have the bits of pools made from a sequence's
// contiguous keys, and score the same through the block table, past the old 65,539-token limit.
// Decode rows of different sequences (each its own table and position) score in one launch with
// the bits of one launch a row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "engine/backend/cpu/dsa_indexer.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/backend/cuda/latent_store.h"
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
                            {static_cast<const float*>(dp.data())}, pools, out + r * pools,
                            nullptr);
  } else {
    cuda::dsa_pool_scores(qp, wp, rows, kHeads, {static_cast<const float*>(dp.data())}, pools, out,
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

TEST(CudaDsaScores, PoolsKeptInPagesEqualPoolsOfContiguousKeys) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  constexpr int kBlock = 16, kPerBlock = kBlock / 4;
  const int64_t n = 70001, pools = n / 4;  // 17,500 pools: past the old 16,384
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  // A scattered block table: logical block b lives in physical block (b * 7919) % blocks' slot.
  std::vector<int32_t> table(static_cast<size_t>(blocks)), page_rows(static_cast<size_t>(n)),
      positions(static_cast<size_t>(n));
  for (int64_t b = 0; b < blocks; ++b) table[size_t(b)] = int32_t((b * 7919) % blocks);
  for (int64_t j = 0; j < n; ++j) {
    positions[size_t(j)] = int32_t(j);
    page_rows[size_t(j)] = table[size_t(j / kBlock)] * kBlock + int32_t(j % kBlock);
  }
  ASSERT_EQ(std::set<int32_t>(table.begin(), table.end()).size(), table.size());
  const auto keys = cuda_test::uniform(21, size_t(n * kDim), 0.0f, 1.0f);
  const auto gates = cuda_test::uniform(22, size_t(n), 0.0f, 2.0f);
  const std::vector<float> ape = {0.5f, -0.25f, 0.0f, 1.0f};
  auto dk = cuda_test::to_device(keys), dg = cuda_test::to_device(gates),
       da = cuda_test::to_device(ape), dr = cuda_test::to_device(page_rows),
       dpos = cuda_test::to_device(positions), dt = cuda_test::to_device(table);
  const int64_t slots = blocks * kBlock;
  cuda::DeviceBuffer kp(size_t(slots * kDim) * 4), gp(size_t(slots) * 4),
      pp(size_t(slots / 4 * kDim) * 4), contiguous(size_t(pools * kDim) * 4);
  const auto* kf = static_cast<const float*>(dk.data());
  const auto* gf = static_cast<const float*>(dg.data());
  const auto* af = static_cast<const float*>(da.data());
  const auto* rows = static_cast<const int32_t*>(dr.data());
  const auto* pos = static_cast<const int32_t*>(dpos.data());
  // Two steps cut mid-pool (rows 0..40001, then the rest): a pool is made by the step that
  // stores its fourth token, from keys of both steps.
  const int64_t cut = 40002;
  for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, cut}, {cut, n}}) {
    cuda::store_index_keys(kf + r0 * kDim, gf + r0, r1 - r0, kDim, rows + r0,
                           static_cast<float*>(kp.data()), static_cast<float*>(gp.data()), nullptr);
    cuda::dsa_pool_completed(static_cast<const float*>(kp.data()),
                             static_cast<const float*>(gp.data()), af, pos + r0, rows + r0, r1 - r0,
                             static_cast<float*>(pp.data()), nullptr);
  }
  cuda::dsa_pool_keys(kf, gf, af, pools, static_cast<float*>(contiguous.data()), nullptr);
  const auto paged = cuda_test::to_host<float>(pp, size_t(slots / 4 * kDim));
  const auto want = cuda_test::to_host<float>(contiguous, size_t(pools * kDim));
  for (int64_t p = 0; p < pools; ++p) {
    const int64_t entry = int64_t(table[size_t(p / kPerBlock)]) * kPerBlock + p % kPerBlock;
    ASSERT_EQ(std::memcmp(&paged[size_t(entry * kDim)], &want[size_t(p * kDim)], kDim * 4), 0)
        << "pool " << p;
  }
  // Scores through the table equal scores of the contiguous pools, for both kernels.
  for (int64_t r : {int64_t(1), int64_t(5)}) {
    const auto q = cuda_test::uniform(23 + uint64_t(r), size_t(r * kHeads * kDim), 0.0f, 1.0f);
    const auto w = cuda_test::uniform(24 + uint64_t(r), size_t(r * kHeads), 0.5f, 0.5f);
    auto dq = cuda_test::to_device(q), dw = cuda_test::to_device(w);
    cuda::DeviceBuffer s1(size_t(r * pools) * 4), s2(size_t(r * pools) * 4);
    const auto* qf = static_cast<const float*>(dq.data());
    const auto* wf = static_cast<const float*>(dw.data());
    cuda::dsa_pool_scores(
        qf, wf, r, kHeads,
        {static_cast<const float*>(pp.data()), static_cast<const int32_t*>(dt.data()), kPerBlock},
        pools, static_cast<float*>(s1.data()), nullptr);
    cuda::dsa_pool_scores(qf, wf, r, kHeads, {static_cast<const float*>(contiguous.data())}, pools,
                          static_cast<float*>(s2.data()), nullptr);
    const auto a = cuda_test::to_host<float>(s1, size_t(r * pools));
    const auto b = cuda_test::to_host<float>(s2, size_t(r * pools));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << r << " rows";
  }
}

TEST(CudaDsaScores, DecodeRowsOfTheirOwnSequencesScoreInOneLaunchAsOneByOne) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  constexpr int kBlock = 16, kPerBlock = kBlock / 4, kRows = 5;
  constexpr int64_t kStride = 40, kBlocks = kRows * kStride, kBucket = kStride * kPerBlock;
  // Row r's sequence owns blocks r, r + 5, r + 10, ... (scattered among the others') and sits at
  // its own position, some past the bucket's first tile, one shorter than a pool.
  const std::vector<int32_t> positions = {2, 37, 150, 159, 97};
  std::vector<int32_t> tables(size_t(kRows * kStride));
  for (int r = 0; r < kRows; ++r)
    for (int64_t b = 0; b < kStride; ++b) tables[size_t(r * kStride + b)] = int32_t(b * kRows + r);
  const auto pooled = cuda_test::uniform(31, size_t(kBlocks * kPerBlock * kDim), -1.0f, 1.0f);
  const auto q = cuda_test::uniform(32, size_t(kRows * kHeads * kDim), -1.0f, 1.0f);
  const auto w = cuda_test::uniform(33, size_t(kRows * kHeads), 0.0f, 1.0f);
  auto dp = cuda_test::to_device(pooled), dq = cuda_test::to_device(q),
       dw = cuda_test::to_device(w), dt = cuda_test::to_device(tables),
       dpos = cuda_test::to_device(positions);
  const auto* qf = static_cast<const float*>(dq.data());
  const auto* wf = static_cast<const float*>(dw.data());
  const auto* tf = static_cast<const int32_t*>(dt.data());
  const auto* pf = static_cast<const int32_t*>(dpos.data());
  const std::vector<float> unset(size_t(kRows * kBucket), -7.0f);  // pools a row does not see
  auto one = cuda_test::to_device(unset), each = cuda_test::to_device(unset);
  cuda::PooledKeys keys{static_cast<const float*>(dp.data()), tf, kPerBlock, kStride};
  cuda::dsa_pool_scores(qf, wf, kRows, kHeads, keys, kBucket, static_cast<float*>(one.data()),
                        nullptr, kDim, pf);
  for (int r = 0; r < kRows; ++r) {
    const cuda::PooledKeys own{static_cast<const float*>(dp.data()), tf + r * kStride, kPerBlock};
    cuda::dsa_pool_scores(qf + r * kHeads * kDim, wf + r * kHeads, 1, kHeads, own, kBucket,
                          static_cast<float*>(each.data()) + r * kBucket, nullptr, kDim, pf + r);
  }
  const auto a = cuda_test::to_host<float>(one, unset.size());
  const auto b = cuda_test::to_host<float>(each, unset.size());
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  // Each row scored its own sequence's pools: they differ from row to row where both see them,
  // and a row leaves the pools past its position as they were.
  EXPECT_NE(a[size_t(2 * kBucket)], a[size_t(3 * kBucket)]);
  for (int r = 0; r < kRows; ++r) {
    const int seen = (positions[size_t(r)] + 1) / 4;
    EXPECT_EQ(a[size_t(r * kBucket + seen)], -7.0f) << "row " << r;
    if (seen > 0) {
      EXPECT_NE(a[size_t(r * kBucket + seen - 1)], -7.0f) << "row " << r;
    }
  }
}

}  // namespace
}  // namespace sparkglm
