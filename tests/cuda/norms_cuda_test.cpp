// The fused row norms of the MTP module (norms.h): add_rms_norm_rows gives the bits of
// add_in_place then rms_norm_rows, and mtp_entry_bf16 the bits of embed_tokens, two
// rms_norm_rows and concat_bf16 (the launches they replace), an id outside the vocabulary
// included, at widths from one float4 a thread to the widest cached row and past it;
// mtp_entry_picked_bf16 on picks it scans the bits of sample_greedy then mtp_entry_bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/runner_kernels.h"
#include "engine/backend/cuda/sampling.h"
#include "engine/core/dtype.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
constexpr int64_t kRows = 3;
constexpr float kEps = 1e-5f;

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The MTP input's operands on the device, seeded from key .. key + 3: a BF16 embedding table
// [vocab, n], states h [rows, n] and the two norms' weights [n].
struct EntryOperands {
  cuda::DeviceBuffer table, h, e_norm, h_norm;
  int64_t vocab, n;
  const float* states() const { return static_cast<const float*>(h.data()); }
  cuda::MtpEntry entry(cuda::DeviceBuffer& cat) const {
    return {
        static_cast<const uint16_t*>(table.data()), vocab, static_cast<const float*>(e_norm.data()),
        static_cast<const float*>(h_norm.data()),   kEps,  n,
        static_cast<uint16_t*>(cat.data())};
  }
};

EntryOperands entry_operands(uint64_t key, int64_t vocab, int64_t rows, int64_t n) {
  const auto table_f = cuda_test::uniform(key + uint64_t(n), size_t(vocab * n), 0.0f, 1.0f);
  std::vector<uint16_t> table(table_f.size());
  for (size_t i = 0; i < table.size(); ++i) table[i] = f32_to_bf16(table_f[i]);
  return {
      cuda_test::to_device(table),
      cuda_test::to_device(cuda_test::uniform(key + 1 + uint64_t(n), size_t(rows * n), 0.0f, 2.0f)),
      cuda_test::to_device(cuda_test::uniform(key + 2 + uint64_t(n), size_t(n), 1.0f, 0.5f)),
      cuda_test::to_device(cuda_test::uniform(key + 3 + uint64_t(n), size_t(n), 1.0f, 0.5f)),
      vocab,
      n};
}

TEST(CudaNorms, AddThenNormInOneLaunchGivesTheBitsOfItsTwoLaunches) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (int64_t n : {int64_t(256), int64_t(2052), int64_t(4096), int64_t(4100)}) {
    const size_t count = size_t(kRows * n);
    const auto x = cuda_test::uniform(41 + uint64_t(n), count, 0.0f, 3.0f);
    const auto add = cuda_test::uniform(42 + uint64_t(n), count, 0.0f, 3.0f);
    const auto w = cuda_test::uniform(43 + uint64_t(n), size_t(n), 1.0f, 0.5f);
    auto dadd = cuda_test::to_device(add), dw = cuda_test::to_device(w);
    const auto* af = static_cast<const float*>(dadd.data());
    const auto* wf = static_cast<const float*>(dw.data());
    auto x1 = cuda_test::to_device(x), x2 = cuda_test::to_device(x);
    cuda::DeviceBuffer y1(count * 4), y2(count * 4), b1(count * 2), b2(count * 2);
    cuda::add_in_place(static_cast<float*>(x1.data()), af, int64_t(count), nullptr);
    cuda::rms_norm_rows(static_cast<const float*>(x1.data()), wf, kEps, kRows, n,
                        static_cast<float*>(y1.data()), static_cast<uint16_t*>(b1.data()), nullptr);
    cuda::add_rms_norm_rows(static_cast<float*>(x2.data()), af, wf, kEps, kRows, n,
                            static_cast<float*>(y2.data()), static_cast<uint16_t*>(b2.data()),
                            nullptr);
    EXPECT_TRUE(
        same_bits(cuda_test::to_host<float>(x1, count), cuda_test::to_host<float>(x2, count)))
        << "sums, n = " << n;
    EXPECT_TRUE(
        same_bits(cuda_test::to_host<float>(y1, count), cuda_test::to_host<float>(y2, count)))
        << "normed, n = " << n;
    EXPECT_TRUE(
        same_bits(cuda_test::to_host<uint16_t>(b1, count), cuda_test::to_host<uint16_t>(b2, count)))
        << "BF16, n = " << n;
    // And the sums are the sums (not x itself).
    const auto sums = cuda_test::to_host<float>(x2, count);
    EXPECT_EQ(sums[5], x[5] + add[5]);
  }
}

TEST(CudaNorms, TheMtpInputInOneLaunchGivesTheBitsOfEmbedNormNormConcat) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  EXPECT_FALSE(cuda::mtp_entry_fits(4100));
  EXPECT_FALSE(cuda::mtp_entry_fits(254));
  for (int64_t n : {int64_t(256), int64_t(2048), int64_t(4096)}) {
    ASSERT_TRUE(cuda::mtp_entry_fits(n));
    constexpr int64_t kVocab = 11;
    const EntryOperands in = entry_operands(51, kVocab, kRows, n);
    const std::vector<int32_t> ids = {7, int32_t(kVocab), 0};  // the middle one is out of range
    auto di = cuda_test::to_device(ids);
    const auto* tf = static_cast<const uint16_t*>(in.table.data());
    const auto* idf = static_cast<const int32_t*>(di.data());
    const auto* enf = static_cast<const float*>(in.e_norm.data());
    const auto* hnf = static_cast<const float*>(in.h_norm.data());
    const size_t count = size_t(kRows * n), cat_count = 2 * count;
    cuda::DeviceBuffer e(count * 4), hnorm(count * 4), cat1(cat_count * 2), cat2(cat_count * 2);
    auto* ef = static_cast<float*>(e.data());
    cuda::embed_tokens(tf, kVocab, n, idf, kRows, 1, ef, nullptr);
    cuda::rms_norm_rows(ef, enf, kEps, kRows, n, ef, nullptr, nullptr);
    cuda::rms_norm_rows(in.states(), hnf, kEps, kRows, n, static_cast<float*>(hnorm.data()),
                        nullptr, nullptr);
    cuda::concat_bf16(ef, static_cast<const float*>(hnorm.data()), kRows, n,
                      static_cast<uint16_t*>(cat1.data()), nullptr);
    cuda::mtp_entry_bf16(in.entry(cat2), idf, in.states(), kRows, nullptr);
    const auto a = cuda_test::to_host<uint16_t>(cat1, cat_count);
    const auto b = cuda_test::to_host<uint16_t>(cat2, cat_count);
    EXPECT_TRUE(same_bits(a, b)) << "n = " << n;
    // The out-of-range id's embedding half is NaN, its hidden half is not.
    EXPECT_TRUE(std::isnan(bf16_to_f32(b[size_t(2 * n)])));
    EXPECT_FALSE(std::isnan(bf16_to_f32(b[size_t(3 * n)])));
  }
}

TEST(CudaNorms, TheMtpInputOnGreedyPicksGivesTheBitsOfSampleGreedyThenTheInput) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // tinyglm-micro's vocabulary and width, and the widest row with the largest one-block
  // vocabulary; four rows, one with a tie at its maximum (the lower id wins) and one all -inf
  // (no candidate: id -1, so a NaN embedding half, as the split scan's token gives).
  for (const auto& [vocab, n] : {std::pair<int64_t, int64_t>{320, 256}, {2048, 4096}}) {
    constexpr int64_t kPickRows = 4;
    auto logits = cuda_test::uniform(61 + uint64_t(n), size_t(kPickRows * vocab), 0.0f, 3.0f);
    logits[size_t(vocab + 17)] = logits[size_t(vocab + 200)] = 9.0f;  // row 1: tie, 17 wins
    for (int64_t i = 0; i < vocab; ++i) logits[size_t(3 * vocab + i)] = -INFINITY;
    const EntryOperands in = entry_operands(62, vocab, kPickRows, n);
    auto dl = cuda_test::to_device(logits);
    const size_t cat_count = size_t(2 * kPickRows * n);
    cuda::DeviceBuffer picks1(kPickRows * 4), picks2(kPickRows * 4), cat1(cat_count * 2),
        cat2(cat_count * 2);
    const auto* lf = static_cast<const float*>(dl.data());
    auto* p1 = static_cast<int32_t*>(picks1.data());
    auto keys = cuda_test::to_device(std::vector<unsigned long long>(kPickRows, 0));
    cuda::sample_greedy(lf, kPickRows, vocab, p1, nullptr,
                        static_cast<unsigned long long*>(keys.data()));
    cuda::mtp_entry_bf16(in.entry(cat1), p1, in.states(), kPickRows, nullptr);
    cuda::mtp_entry_picked_bf16(in.entry(cat2), cuda::GreedyPicks{nullptr, lf, vocab},
                                static_cast<int32_t*>(picks2.data()), in.states(), kPickRows,
                                nullptr);
    const auto a = cuda_test::to_host<int32_t>(picks1, kPickRows);
    const auto b = cuda_test::to_host<int32_t>(picks2, kPickRows);
    EXPECT_EQ(a, b) << "vocab = " << vocab;
    EXPECT_EQ(b[1], 17) << "vocab = " << vocab;
    EXPECT_EQ(b[3], -1) << "vocab = " << vocab;
    EXPECT_TRUE(same_bits(cuda_test::to_host<uint16_t>(cat1, cat_count),
                          cuda_test::to_host<uint16_t>(cat2, cat_count)))
        << "vocab = " << vocab;
  }
}

}  // namespace
}  // namespace sparkglm
