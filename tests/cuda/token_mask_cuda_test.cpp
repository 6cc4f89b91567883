// Grammar masks on the device: apply_token_masks leaves exactly the logits the CPU's
// apply_token_mask leaves, rows without a mask untouched, and a masked row's device greedy pick is
// the host's pick under the same mask (the allowed token, not the raw argmax).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/backend/cuda/sampling.h"
#include "engine/backend/cuda/token_mask.h"
#include "engine/model/step_sampling.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;

TEST(CudaTokenMask, EqualsTheHostMaskAndSteersTheGreedyPick) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 3, vocab = 1000;  // not a multiple of 32: the last word is partial
  const int32_t words = int32_t((vocab + 31) / 32);
  std::vector<float> logits = cuda_test::uniform(5, size_t(rows * vocab), 0.0f, 4.0f);
  std::mt19937 rng(3);
  std::vector<uint32_t> masks(size_t(2 * words));
  for (auto& w : masks) w = uint32_t(rng()) & uint32_t(rng());  // about a quarter allowed
  const std::vector<int32_t> mask_row = {1, -1, 0};

  std::vector<float> want = logits;
  for (int64_t r = 0; r < rows; ++r)
    if (mask_row[size_t(r)] >= 0)
      apply_token_mask(&masks[size_t(mask_row[size_t(r)] * words)], &want[size_t(r * vocab)],
                       vocab);

  cuda::DeviceBuffer d_logits = cuda_test::to_device(logits);
  cuda::DeviceBuffer d_rows = cuda_test::to_device(mask_row);
  cuda::DeviceBuffer d_masks = cuda_test::to_device(masks);
  cuda::apply_token_masks(static_cast<float*>(d_logits.data()), rows, vocab,
                          static_cast<const int32_t*>(d_rows.data()),
                          static_cast<const uint32_t*>(d_masks.data()), words, nullptr);
  const std::vector<float> got = cuda_test::to_host<float>(d_logits, size_t(rows * vocab));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(got[i] == want[i] || (std::isinf(got[i]) && std::isinf(want[i])))
        << "logit " << i << ": " << got[i] << " vs " << want[i];

  cuda::DeviceBuffer d_tokens(size_t(rows) * sizeof(int32_t));
  cuda::sample_greedy(static_cast<const float*>(d_logits.data()), rows, vocab,
                      static_cast<int32_t*>(d_tokens.data()), nullptr);
  const std::vector<int32_t> picks = cuda_test::to_host<int32_t>(d_tokens, size_t(rows));
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_EQ(picks[size_t(r)], greedy_token(&want[size_t(r * vocab)], vocab)) << "row " << r;
}

}  // namespace
}  // namespace sparkglm
