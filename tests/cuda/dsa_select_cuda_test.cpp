// The device selection of attended positions (dsa_select) against cpu::select_attended, exactly:
// random scores, heavy ties (few distinct values), NaN, -0 next to +0, fewer valid pools than
// topk, and the largest context the kernel serves; rows of one block's length and the
// multi-block path's longer rows, alone and mixed in one call, and a call replayed from a graph.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cpu/dsa_indexer.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/model/engine_fault.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;

constexpr int kTopk = 512;

// Selects for `positions` in one call (max_pools: the longest row's pools unless given) and
// compares every row with cpu::select_attended (both under `fault`: the tie rule flipped or not).
void check_rows(const std::vector<int32_t>& positions, const std::vector<float>& scores,
                int64_t stride, int64_t max_pools = 0, EngineFault fault = EngineFault::kNone,
                int topk = kTopk) {
  const int64_t rows = int64_t(positions.size());
  const int64_t out_stride = topk * 4 + 3;
  if (max_pools == 0)
    for (int32_t t : positions) max_pools = std::max<int64_t>(max_pools, (t + 1) / 4);
  auto d_scores = cuda_test::to_device(scores);
  auto d_pos = cuda_test::to_device(positions);
  cuda::DeviceBuffer d_out(size_t(rows * out_stride) * 4), d_counts(size_t(rows) * 4);
  cuda::DeviceBuffer d_ws(cuda::dsa_select_workspace_bytes(rows, max_pools) + 16);
  cuda::dsa_select(static_cast<const float*>(d_scores.data()), stride,
                   static_cast<const int32_t*>(d_pos.data()), rows, max_pools, topk,
                   static_cast<int32_t*>(d_out.data()), out_stride,
                   static_cast<int32_t*>(d_counts.data()), d_ws.data(), nullptr,
                   fault == EngineFault::kIndexerTieFlipped);
  const auto out = cuda_test::to_host<int32_t>(d_out, size_t(rows * out_stride));
  const auto counts = cuda_test::to_host<int32_t>(d_counts, size_t(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const int t = positions[size_t(r)];
    const std::vector<float> row(scores.begin() + r * stride, scores.begin() + (r + 1) * stride);
    const std::vector<int32_t> want = cpu::select_attended(row, t, 4, topk, fault);
    ASSERT_EQ(counts[size_t(r)], int32_t(want.size())) << "row " << r << " at position " << t;
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(out[size_t(r * out_stride) + i], want[i])
          << "row " << r << " at position " << t << " entry " << i;
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

// Rows longer than one block keeps in shared memory take the multi-block path: the same choices,
// up to the deepest context (1,048,575: 262,144 pools), with ties and NaN.
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

// Scores for the multi-block path's cases, by kind; every row `stride` long.
enum class Kind { kRandom, kFewValues, kAllEqual, kSpreadTies, kNan, kFewValid, kSignedZeros };

std::vector<float> row_scores(Kind kind, uint64_t seed, int64_t stride) {
  std::vector<float> v = cuda_test::uniform(seed, size_t(stride), 0.0f, 1.0f);
  for (int64_t p = 0; p < stride; ++p) {
    float& x = v[size_t(p)];
    switch (kind) {
      case Kind::kRandom:
        break;
      case Kind::kFewValues:  // 17 distinct values: thousands tied at the cut
        x = std::round(x * 8.0f) / 8.0f;
        break;
      case Kind::kAllEqual:  // every pool at T: the lowest-numbered topk
        x = 0.5f;
        break;
      case Kind::kSpreadTies:  // beyond 50,000 pools: under 512 above 0.5, the chosen at 0.5
                               // spread over several chunks
        x = p % 811 == 5 ? 0.9f : p % 97 == 0 ? 0.5f : x * 0.4f;
        break;
      case Kind::kNan:  // a NaN in every third pool, including around the cut
        if (p % 3 == 1) x = std::nanf("");
        break;
      case Kind::kFewValid:  // 300 valid pools spread over the row: every one chosen
        if (p % 701 != 0 || p / 701 >= 300) x = std::nanf("");
        break;
      case Kind::kSignedZeros:
        x = (p % 2) ? 0.0f : -0.0f;
        break;
    }
  }
  return v;
}

// One decode row at a time, from the longest row one block keeps in shared memory to the deepest
// context, with every tail length, on each kind of scores: one block at its longest, then the
// multi-block path alone.
TEST(CudaDsaSelect, OneLongDecodeRowChoosesAsTheCpuDoesAtEveryLength) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // Context lengths in tokens: 16,384 pools (one block's last), then 16,385 pools with tails 0
  // and 3, on up to 262,144 pools (position 1,048,575).
  const std::vector<int32_t> lengths = {16384 * 4 + 3,  16385 * 4,     16385 * 4 + 3,
                                        20000 * 4 + 1,  65536 * 4 + 2, 100003 * 4 + 3,
                                        262143 * 4 + 3, 262144 * 4};
  const std::vector<Kind> kinds = {Kind::kRandom,     Kind::kFewValues, Kind::kAllEqual,
                                   Kind::kSpreadTies, Kind::kNan,       Kind::kFewValid,
                                   Kind::kSignedZeros};
  for (size_t l = 0; l < lengths.size(); ++l)
    for (size_t k = 0; k < kinds.size(); ++k) {
      const int t = lengths[l] - 1;
      const int64_t pools = (t + 1) / 4;
      SCOPED_TRACE("position " + std::to_string(t) + ", kind " + std::to_string(k));
      check_rows({t}, row_scores(kinds[k], 0x3a00 + l * 16 + k, pools), pools);
    }
}

// Rows of different lengths for one call (dense, one block, multi-block), each kind of scores,
// every row kIndexMaxPools long.
const std::vector<int32_t> kMixedPositions = {1048575,       70000,  2047,   16384 * 4 + 3,
                                              16384 * 4 + 4, 500001, 8190,   99999,
                                              1048574,       262145, 131072, 40000};
std::vector<float> mixed_scores() {
  const std::vector<Kind> kinds = {Kind::kRandom,      Kind::kSpreadTies, Kind::kRandom,
                                   Kind::kFewValues,   Kind::kAllEqual,   Kind::kNan,
                                   Kind::kFewValues,   Kind::kFewValid,   Kind::kSpreadTies,
                                   Kind::kSignedZeros, Kind::kNan,        Kind::kFewValid};
  std::vector<float> scores;
  scores.reserve(kMixedPositions.size() * size_t(cuda::kIndexMaxPools));
  for (size_t r = 0; r < kMixedPositions.size(); ++r) {
    const auto row = row_scores(kinds[r], 0x4b00 + r, cuda::kIndexMaxPools);
    scores.insert(scores.end(), row.begin(), row.end());
  }
  return scores;
}

// The mixed rows in one call (the grid sized for the deepest context, so most blocks of the
// shorter rows find no pools).
TEST(CudaDsaSelect, RowsOfMixedLengthsInOneCallChooseAsTheCpuDoes) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t stride = cuda::kIndexMaxPools;
  const std::vector<float> scores = mixed_scores();
  check_rows(kMixedPositions, scores, stride);
  check_rows(kMixedPositions, scores, stride, stride);  // a looser bound: more blocks, no pools
}

// The negative control EngineFault::kIndexerTieFlipped (engine_fault.h): with the tie rule
// flipped, both paths choose as the CPU's flipped rule does, on the mixed rows' ties (all equal,
// few values, ties spread over chunks); and the flip does change those rows' choices.
TEST(CudaDsaSelect, WithTheTieRuleFlippedBothPathsChooseAsTheFlippedCpuRule) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t stride = cuda::kIndexMaxPools;
  const std::vector<float> scores = mixed_scores();
  check_rows(kMixedPositions, scores, stride, 0, EngineFault::kIndexerTieFlipped);
  for (size_t r : {size_t(6), size_t(4), size_t(8)}) {  // one block, then the multi-block path
    const std::vector<float> row(scores.begin() + int64_t(r) * stride,
                                 scores.begin() + int64_t(r + 1) * stride);
    const int t = kMixedPositions[r];
    EXPECT_NE(cpu::select_attended(row, t, 4, kTopk),
              cpu::select_attended(row, t, 4, kTopk, EngineFault::kIndexerTieFlipped))
        << "row " << r << ": the flip must matter here";
  }
}

// Rows of 513-1025 pools (past topk, the lengths a one-pass rank would take; session 30 measured
// one and dropped it: slower at C4): the same choices as the CPU's under ties, NaNs, signed zeros
// and too few valid pools, under both tie rules.
TEST(CudaDsaSelect, RowsJustPastTopkChooseAsTheCpuDoesUnderBothTieRules) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t stride = 1100;
  const std::vector<int32_t> positions = {2051, 2999, 3500, 4095, 4099, 4102};
  std::vector<float> scores(positions.size() * size_t(stride));
  for (size_t r = 0; r < positions.size(); ++r) {
    const auto u = cuda_test::uniform(0x5e1c + r, size_t(stride), -1.0f, 1.0f);
    for (int64_t p = 0; p < stride; ++p) {
      float v = u[size_t(p)];
      if (r == 0 || r == 4 || r == 5) v = std::round(v * 3.0f) / 3.0f;  // 7 values: ties at T
      if (r == 1 && p % 5 == 0) v = std::nanf("");
      if (r == 2) v = (p % 2) ? 0.0f : -0.0f;
      if (r == 3 && p % 3 != 0) v = std::nanf("");  // 342 valid pools, fewer than topk
      scores[r * size_t(stride) + size_t(p)] = v;
    }
  }
  check_rows(positions, scores, stride);
  check_rows(positions, scores, stride, 0, EngineFault::kIndexerTieFlipped);
  const std::vector<float> row0(scores.begin(), scores.begin() + stride);
  EXPECT_NE(cpu::select_attended(row0, positions[0], 4, kTopk),
            cpu::select_attended(row0, positions[0], 4, kTopk, EngineFault::kIndexerTieFlipped))
      << "the flip must matter in row 0";
}

// A small topk (tinyglm-micro's 4 pools, and 1 and 8) over rows of 5 to 2,048 pools, the short-row
// path, and 2,049 pools, the radix passes: the CPU's choices under ties at T, NaNs, signed zeros
// and too few valid pools, under both tie rules.
TEST(CudaDsaSelect, ASmallTopkChoosesAsTheCpuDoesUnderBothTieRules) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t stride = 2100;
  const std::vector<int32_t> positions = {19, 150, 601, 602, 3000, 4097, 8191, 8199};
  std::vector<float> scores(positions.size() * size_t(stride));
  for (size_t r = 0; r < positions.size(); ++r) {
    const auto u = cuda_test::uniform(0x5a11 + r, size_t(stride), -1.0f, 1.0f);
    for (int64_t p = 0; p < stride; ++p) {
      float v = u[size_t(p)];
      if (r == 1 || r == 3 || r == 7) v = std::round(v * 2.0f) / 2.0f;  // 5 values: ties at T
      if (r == 2 && p % 4 == 0) v = std::nanf("");
      if (r == 4) v = (p % 2) ? 0.0f : -0.0f;
      if (r == 5 && p > 6) v = std::nanf("");  // 7 valid pools
      scores[r * size_t(stride) + size_t(p)] = v;
    }
  }
  for (int topk : {1, 4, 8})
    for (EngineFault fault : {EngineFault::kNone, EngineFault::kIndexerTieFlipped}) {
      SCOPED_TRACE(testing::Message()
                   << "topk " << topk << ", flipped " << (fault != EngineFault::kNone));
      check_rows(positions, scores, stride, 0, fault, topk);
    }
  const std::vector<float> row1(scores.begin() + stride, scores.begin() + 2 * stride);
  EXPECT_NE(cpu::select_attended(row1, positions[1], 4, 4),
            cpu::select_attended(row1, positions[1], 4, 4, EngineFault::kIndexerTieFlipped))
      << "the flip must matter in row 1";
}

// A captured call replays for other positions and scores: its launches depend on host arguments
// only, and the multi-block state starts clean on each replay.
TEST(CudaDsaSelect, CapturedInAGraphItChoosesForNewRowsOnReplay) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t stride = cuda::kIndexMaxPools, rows = 3, out_stride = kTopk * 4 + 3;
  cuda::DeviceBuffer d_scores(size_t(rows * stride) * 4), d_pos(size_t(rows) * 4);
  cuda::DeviceBuffer d_out(size_t(rows * out_stride) * 4), d_counts(size_t(rows) * 4);
  cuda::DeviceBuffer d_ws(cuda::dsa_select_workspace_bytes(rows, stride));
  cudaStream_t stream = nullptr;
  SPARKGLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Configure the kernels outside the capture (their first call sets attributes).
  const std::vector<int32_t> warm = {100, 100, 100};
  d_pos.copy_from_host(warm.data(), warm.size() * 4);
  SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());
  auto select = [&] {
    cuda::dsa_select(static_cast<const float*>(d_scores.data()), stride,
                     static_cast<const int32_t*>(d_pos.data()), rows, stride, kTopk,
                     static_cast<int32_t*>(d_out.data()), out_stride,
                     static_cast<int32_t*>(d_counts.data()), d_ws.data(), stream);
  };
  select();
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SPARKGLM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  select();
  SPARKGLM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  SPARKGLM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const std::vector<std::vector<int32_t>> rounds = {{1048575, 300000, 70001},
                                                    {65539, 1048573, 4095}};
  for (size_t round = 0; round < rounds.size(); ++round) {
    const std::vector<int32_t>& positions = rounds[round];
    std::vector<float> scores;
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = row_scores(r == 1 ? Kind::kSpreadTies : Kind::kFewValues,
                                  0x5c00 + round * 8 + size_t(r), stride);
      scores.insert(scores.end(), row.begin(), row.end());
    }
    d_scores.copy_from_host(scores.data(), scores.size() * 4);
    d_pos.copy_from_host(positions.data(), positions.size() * 4);
    SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());  // the copies, before the non-blocking stream
    SPARKGLM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto out = cuda_test::to_host<int32_t>(d_out, size_t(rows * out_stride));
    const auto counts = cuda_test::to_host<int32_t>(d_counts, size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> row(scores.begin() + r * stride, scores.begin() + (r + 1) * stride);
      const auto want = cpu::select_attended(row, positions[size_t(r)], 4, kTopk);
      ASSERT_EQ(counts[size_t(r)], int32_t(want.size())) << "round " << round << " row " << r;
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(out[size_t(r * out_stride) + i], want[i])
            << "round " << round << " row " << r << " entry " << i;
    }
  }
  SPARKGLM_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SPARKGLM_CUDA_CHECK(cudaGraphDestroy(graph));
  SPARKGLM_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace sparkglm
