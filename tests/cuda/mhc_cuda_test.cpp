// mHC's folded launches (mhc.h: HcFold), which a decode-sized step of the runner takes: hc_post
// folded into the pre after it (its residual written to X_next, X left as it was) and the RMS norm
// folded into the pre, with the bits of hc_post, hc_pre and rms_norm_rows launched one by one, at
// both served widths and at 1 and 3 rows; and the head with its post folded in.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/mhc.h"
#include "engine/backend/cuda/norms.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
constexpr float kEps = 1e-5f;

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

float* f32(cuda::DeviceBuffer& b) {
  return static_cast<float*>(b.data());
}

// One mHC site's inputs at width D over T rows: the residual, the block output that the post
// adds, the previous pre's post and comb, the site's fn, base and scale, and a norm weight.
struct Site {
  int64_t T, D;
  std::vector<float> X, b, post, comb, fn, base, scale, norm_w;
  Site(int64_t rows, int64_t width, int mixes, uint64_t key) : T(rows), D(width) {
    const size_t n = size_t(T * cuda::kHcStreams * D);
    X = cuda_test::uniform(key, n, 0.0f, 2.0f);
    b = cuda_test::uniform(key + 1, size_t(T * D), 0.0f, 1.0f);
    post = cuda_test::uniform(key + 2, size_t(T * 4), 1.0f, 0.9f);
    comb = cuda_test::uniform(key + 3, size_t(T * 16), 0.25f, 0.2f);
    fn = cuda_test::uniform(key + 4, size_t(mixes) * size_t(4 * D), 0.0f, 0.05f);
    base = cuda_test::uniform(key + 5, size_t(mixes), 0.0f, 1.0f);
    scale = cuda_test::uniform(key + 6, 3, 0.5f, 0.3f);
    norm_w = cuda_test::uniform(key + 7, size_t(D), 1.0f, 0.5f);
  }
  size_t residual() const { return X.size(); }
  size_t row_values() const { return size_t(T * D); }
};

cuda::HcConstants constants(int64_t D) {
  cuda::HcConstants k;
  k.width = int(D);
  return k;
}

TEST(CudaMhc, APostAndANormFoldedIntoThePreGiveTheBitsOfTheirOwnLaunches) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (int64_t D : {int64_t(cuda::kHcMicroWidth), int64_t(cuda::kHcWidth)}) {
    for (int64_t T : {int64_t(1), int64_t(3)}) {
      for (bool with_post : {true, false}) {
        SCOPED_TRACE(testing::Message() << "D = " << D << ", T = " << T << ", post " << with_post);
        const Site s(T, D, cuda::kHcMixes, 700 + uint64_t(D) + uint64_t(T));
        const cuda::HcConstants k = constants(D);
        auto fn = cuda_test::to_device(s.fn), base = cuda_test::to_device(s.base),
             scale = cuda_test::to_device(s.scale), w = cuda_test::to_device(s.norm_w),
             b = cuda_test::to_device(s.b), post_in = cuda_test::to_device(s.post),
             comb_in = cuda_test::to_device(s.comb);
        const size_t rv = s.row_values(), partials = size_t(cuda::hc_partials_floats(T));
        // One by one: hc_post in place, hc_pre, rms_norm_rows.
        auto X1 = cuda_test::to_device(s.X);
        cuda::DeviceBuffer y1(rv * 4), post1(size_t(T) * 16), comb1(size_t(T) * 64), n1(rv * 4),
            nb1(rv * 2), p1(partials * 4);
        if (with_post)
          cuda::hc_post(f32(b), f32(post_in), f32(comb_in), f32(X1), T, nullptr, int(D));
        cuda::hc_pre(k, f32(fn), f32(base), f32(scale), f32(X1), T, f32(y1), f32(post1), f32(comb1),
                     nullptr, f32(p1));
        cuda::rms_norm_rows(f32(y1), f32(w), kEps, T, D, f32(n1),
                            static_cast<uint16_t*>(nb1.data()), nullptr);
        // Folded: two launches.
        auto X2 = cuda_test::to_device(s.X);
        cuda::DeviceBuffer Xn(s.residual() * 4), y2(rv * 4), post2(size_t(T) * 16),
            comb2(size_t(T) * 64), n2(rv * 4), nb2(rv * 2), p2(partials * 4);
        cuda::HcFold fold;
        if (with_post) fold.b = f32(b), fold.post = f32(post_in), fold.comb = f32(comb_in);
        fold.X_next = with_post ? f32(Xn) : nullptr;
        fold.norm_w = f32(w);
        fold.norm_eps = kEps;
        fold.normed = f32(n2);
        fold.normed_bf16 = static_cast<uint16_t*>(nb2.data());
        cuda::hc_pre_folded(k, f32(fn), f32(base), f32(scale), f32(X2), T, f32(y2), f32(post2),
                            f32(comb2), f32(p2), fold, nullptr);

        const auto residual = cuda_test::to_host<float>(X1, s.residual());
        if (with_post) {
          EXPECT_TRUE(same_bits(residual, cuda_test::to_host<float>(Xn, s.residual())))
              << "the residual after the post";
          EXPECT_FALSE(same_bits(residual, s.X)) << "the post must change the residual";
        }
        EXPECT_TRUE(same_bits(cuda_test::to_host<float>(X2, s.residual()), s.X))
            << "the folded post leaves X as it was";
        EXPECT_TRUE(same_bits(cuda_test::to_host<float>(y1, rv), cuda_test::to_host<float>(y2, rv)))
            << "y";
        EXPECT_TRUE(same_bits(cuda_test::to_host<float>(post1, size_t(T) * 4),
                              cuda_test::to_host<float>(post2, size_t(T) * 4)))
            << "post";
        EXPECT_TRUE(same_bits(cuda_test::to_host<float>(comb1, size_t(T) * 16),
                              cuda_test::to_host<float>(comb2, size_t(T) * 16)))
            << "comb";
        EXPECT_TRUE(same_bits(cuda_test::to_host<float>(n1, rv), cuda_test::to_host<float>(n2, rv)))
            << "the normed rows";
        EXPECT_TRUE(
            same_bits(cuda_test::to_host<uint16_t>(nb1, rv), cuda_test::to_host<uint16_t>(nb2, rv)))
            << "their BF16 bits";
      }
    }
  }
}

TEST(CudaMhc, APostFoldedIntoTheHeadGivesTheBitsOfItsOwnLaunches) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (int64_t D : {int64_t(cuda::kHcMicroWidth), int64_t(cuda::kHcWidth)}) {
    const int64_t T = 3;
    SCOPED_TRACE(testing::Message() << "D = " << D);
    const Site s(T, D, cuda::kHcStreams, 900 + uint64_t(D));
    const cuda::HcConstants k = constants(D);
    auto fn = cuda_test::to_device(s.fn), base = cuda_test::to_device(s.base),
         scale = cuda_test::to_device(s.scale), b = cuda_test::to_device(s.b),
         post_in = cuda_test::to_device(s.post), comb_in = cuda_test::to_device(s.comb);
    const size_t rv = s.row_values(), partials = size_t(cuda::hc_partials_floats(T));
    auto X1 = cuda_test::to_device(s.X), X2 = cuda_test::to_device(s.X);
    cuda::DeviceBuffer Xn(s.residual() * 4), h1(rv * 4), h2(rv * 4), p1(partials * 4),
        p2(partials * 4);
    cuda::hc_post(f32(b), f32(post_in), f32(comb_in), f32(X1), T, nullptr, int(D));
    cuda::hc_head(k, f32(fn), f32(base), f32(scale), f32(X1), T, f32(h1), nullptr, f32(p1));
    cuda::HcFold fold;
    fold.b = f32(b), fold.post = f32(post_in), fold.comb = f32(comb_in), fold.X_next = f32(Xn);
    cuda::hc_head_folded(k, f32(fn), f32(base), f32(scale), f32(X2), T, f32(h2), f32(p2), fold,
                         nullptr);
    EXPECT_TRUE(same_bits(cuda_test::to_host<float>(X1, s.residual()),
                          cuda_test::to_host<float>(Xn, s.residual())));
    EXPECT_TRUE(same_bits(cuda_test::to_host<float>(h1, rv), cuda_test::to_host<float>(h2, rv)));
  }
}

}  // namespace
}  // namespace sparkglm
