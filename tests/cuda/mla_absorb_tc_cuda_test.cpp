// The tensor-core path of MLA's per-head products (mla_absorb_queries_tc, mla_up_values_tc: the
// FP32 operand rounded to BF16, one strided-batched cuBLAS GEMM over the heads), which the runner
// takes for passes of more than 32 rows. Checked against the FP32 kernels, themselves bit for bit
// the CPU's (mla_absorb_cuda_test.cpp), at 33 rows (the smallest pass sent here), 100 and 256
// (kMlaRowChunk), at the tinyGLM shape (64 heads, dn = dv = 256, R = 512) and a small one with
// dn != dv, where a head offset that mixed them up would show.
//
// Tolerance: NMSE < 3e-5. The BF16 rounding alone gives ~2.2e-6 for q~ and ~5e-6 for the BF16 o
// with these inputs (q, ō uniform in [-1, 1], weights in [-0.1, 0.1]; simulated in double
// precision), so the bound leaves a margin of about 6x, while a wrong head, row or stride is O(1).
// The NMSE must also be above zero: zero would mean the FP32 kernels ran, not the GEMM.
// Every element must be written and finite (outputs start as NaN) and nothing past the end.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/mla_absorb.h"
#include "engine/core/dtype.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using namespace cuda_test;

constexpr double kMaxNmse = 3e-5;
constexpr size_t kTail = 4096;  // bytes after an output that must stay untouched
constexpr int64_t kMaxRows = 256;

struct Shape {
  int h, dn, dv, r;
};

const Shape kShapes[] = {{64, 256, 256, 512}, {4, 64, 32, 128}};

std::vector<uint16_t> bf16_weights(const Shape& s, uint64_t seed) {
  const auto wf = uniform(seed, size_t(s.h) * (s.dn + s.dv) * s.r, 0.0f, 0.1f);
  std::vector<uint16_t> w(wf.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
  return w;
}

// `bytes` of output and kTail more, every byte 0xff: NaN as FP32 and as BF16.
cuda::DeviceBuffer poisoned(size_t bytes) {
  cuda::DeviceBuffer b(bytes + kTail);
  SPARKGLM_CUDA_CHECK(cudaMemset(b.data(), 0xff, b.bytes()));
  return b;
}

size_t tail_changes(const cuda::DeviceBuffer& b, size_t bytes) {
  const auto all = to_host<uint8_t>(b, b.bytes());
  size_t changed = 0;
  for (size_t i = bytes; i < all.size(); ++i) changed += all[i] != 0xff;
  return changed;
}

size_t non_finite(const std::vector<float>& v) {
  size_t bad = 0;
  for (float x : v) bad += !std::isfinite(x);
  return bad;
}

size_t bit_mismatches(const std::vector<float>& a, const std::vector<float>& b, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += std::memcmp(&a[i], &b[i], 4) != 0;
  return bad;
}

std::vector<float> widen(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_f32(v[i]);
  return f;
}

// `a`, the rows of a smaller pass, against the same rows of `full` (a kMaxRows pass): bit for bit
// where cuBLAS picks the same kind of kernel for both row counts, which it does not promise; else
// within a rounding-order tolerance (another summation order moves q~ by ulps of FP32, NMSE ~1e-14,
// and a few BF16 o by one unit, NMSE ~1e-10; a wrong row is O(1)). The count of differing values is
// printed (the answer to whether cuBLAS keeps rows invariant).
void compare_passes(const char* what, int64_t t, const std::vector<float>& a,
                    const std::vector<float>& full) {
  const std::vector<float> head(full.begin(), full.begin() + ptrdiff_t(a.size()));
  const size_t differ = bit_mismatches(a, head, a.size());
  std::printf(
      "[   info   ] %s: rows of a %lld-row pass vs the %lld-row pass: %zu of %zu values "
      "differ in bits\n",
      what, static_cast<long long>(t), static_cast<long long>(kMaxRows), differ, a.size());
  EXPECT_LT(nmse(a, head), 1e-7) << what << " T " << t;
}

TEST(CudaMlaAbsorbTensorCores, AbsorbedQueriesMatchTheFp32Kernel) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  cuda::Gemm gemm;
  for (const Shape& s : kShapes) {
    const auto kv_b = bf16_weights(s, 60);
    auto dw = to_device(kv_b);
    const auto q = uniform(61, size_t(kMaxRows) * s.h * s.dn, 0.0f, 1.0f);
    auto dq = to_device(q);
    cuda::DeviceBuffer dq16(size_t(kMaxRows) * s.h * s.dn * 2);
    const auto* w = static_cast<const uint16_t*>(dw.data());
    const auto* qp = static_cast<const float*>(dq.data());
    auto run_tc = [&](int64_t t) {
      const size_t bytes = size_t(t) * s.h * s.r * 4;
      auto out = poisoned(bytes);
      cuda::mla_absorb_queries_tc(qp, t, s.h, s.dn, s.dv, s.r, w,
                                  static_cast<uint16_t*>(dq16.data()),
                                  static_cast<float*>(out.data()), gemm, nullptr);
      EXPECT_EQ(tail_changes(out, bytes), 0u) << "written past the end, T " << t << " H " << s.h;
      return to_host<float>(out, bytes / 4);
    };
    std::vector<float> full;
    for (int64_t t : {int64_t(33), int64_t(100), kMaxRows}) {
      const size_t n = size_t(t) * s.h * s.r;
      cuda::DeviceBuffer dref(n * 4);
      cuda::mla_absorb_queries(qp, t, s.h, s.dn, s.dv, s.r, w, static_cast<float*>(dref.data()),
                               nullptr);
      const auto want = to_host<float>(dref, n);
      const auto got = run_tc(t);
      EXPECT_EQ(non_finite(got), 0u) << "T " << t << " H " << s.h;
      const double e = nmse(got, want);
      EXPECT_LT(e, kMaxNmse) << "T " << t << " H " << s.h;
      EXPECT_GT(e, 0.0) << "T " << t << " H " << s.h << ": the FP32 kernel's bits";
      if (t == kMaxRows) full = got;
    }
    EXPECT_EQ(bit_mismatches(run_tc(kMaxRows), full, full.size()), 0u)
        << "a repeated pass, H " << s.h;
    for (int64_t t : {int64_t(33), int64_t(100)})
      compare_passes(s.h == 64 ? "q~ (tinyGLM)" : "q~ (small)", t, run_tc(t), full);
  }
}

TEST(CudaMlaAbsorbTensorCores, UpProjectedValuesMatchTheFp32Kernel) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  cuda::Gemm gemm;
  for (const Shape& s : kShapes) {
    const auto kv_b = bf16_weights(s, 62);
    auto dw = to_device(kv_b);
    const auto o_bar = uniform(63, size_t(kMaxRows) * s.h * s.r, 0.0f, 1.0f);
    auto dob = to_device(o_bar);
    cuda::DeviceBuffer dob16(size_t(kMaxRows) * s.h * s.r * 2);
    const auto* w = static_cast<const uint16_t*>(dw.data());
    const auto* obp = static_cast<const float*>(dob.data());
    auto run_tc = [&](int64_t t) {
      const size_t bytes = size_t(t) * s.h * s.dv * 2;
      auto out = poisoned(bytes);
      cuda::mla_up_values_tc(obp, t, s.h, s.dn, s.dv, s.r, w, static_cast<uint16_t*>(dob16.data()),
                             static_cast<uint16_t*>(out.data()), gemm, nullptr);
      EXPECT_EQ(tail_changes(out, bytes), 0u) << "written past the end, T " << t << " H " << s.h;
      return widen(to_host<uint16_t>(out, bytes / 2));
    };
    std::vector<float> full;
    for (int64_t t : {int64_t(33), int64_t(100), kMaxRows}) {
      const size_t n = size_t(t) * s.h * s.dv;
      cuda::DeviceBuffer dref(n * 4);
      cuda::mla_up_values(obp, t, s.h, s.dn, s.dv, s.r, w, static_cast<float*>(dref.data()),
                          nullptr, nullptr);
      const auto want = to_host<float>(dref, n);  // FP32: the BF16 o's own rounding counts too
      const auto got = run_tc(t);
      EXPECT_EQ(non_finite(got), 0u) << "T " << t << " H " << s.h;
      const double e = nmse(got, want);
      EXPECT_LT(e, kMaxNmse) << "T " << t << " H " << s.h;
      EXPECT_GT(e, 0.0) << "T " << t << " H " << s.h;
      if (t == kMaxRows) full = got;
    }
    EXPECT_EQ(bit_mismatches(run_tc(kMaxRows), full, full.size()), 0u)
        << "a repeated pass, H " << s.h;
    for (int64_t t : {int64_t(33), int64_t(100)})
      compare_passes(s.h == 64 ? "o (tinyGLM)" : "o (small)", t, run_tc(t), full);
  }
}

}  // namespace
}  // namespace sparkglm
