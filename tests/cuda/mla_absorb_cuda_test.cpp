// MLA absorption (q~ = W_kb^T q per head) and value up-projection (o = W_vb ō per head) follow
// the CPU reference's reduction orders (cpu/mla_layer.cpp: one FMA chain over d for q~,
// cpu::linear's lanes for o), so the declared tolerance is zero: bit for bit at T = 1, 3, 32, 200
// (q~ also at 5, 16 and 17, its kernel boundaries) at the tinyGLM shape (64 heads, dn = dv = 256,
// R = 512) and at a small shape.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/backend/cpu/linear.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/mla_absorb.h"
#include "engine/core/dtype.h"
#include "engine/core/thread_pool.h"
#include "tests/cuda/cuda_test_support.h"

namespace sparkglm {
namespace {

using namespace cuda_test;

struct Shape {
  int h, dn, dv, r;
};

size_t mismatches(const std::vector<float>& got, const std::vector<float>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += std::memcmp(&got[i], &want[i], 4) != 0;
  return bad;
}

std::vector<uint16_t> bf16_weights(const Shape& s, uint64_t seed) {
  const auto wf = uniform(seed, size_t(s.h) * (s.dn + s.dv) * s.r, 0.0f, 0.1f);
  std::vector<uint16_t> w(wf.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
  return w;
}

// absorb_queries' arithmetic: per element one FMA chain over d in increasing order.
std::vector<float> absorb_reference(const Shape& s, const std::vector<float>& q, int64_t t_rows,
                                    const std::vector<uint16_t>& kv_b) {
  std::vector<float> out(size_t(t_rows) * s.h * s.r);
  std::vector<float> w(size_t(s.dn) * s.r);
  for (int h = 0; h < s.h; ++h) {
    const size_t first = size_t(h) * (s.dn + s.dv) * s.r;
    for (size_t i = 0; i < w.size(); ++i) w[i] = bf16_to_f32(kv_b[first + i]);
    for (int64_t t = 0; t < t_rows; ++t)
      for (int e = 0; e < s.r; ++e) {
        float acc = 0.0f;
        for (int d = 0; d < s.dn; ++d)
          acc = std::fma(q[size_t(t * s.h * s.dn + h * s.dn + d)], w[size_t(d * s.r + e)], acc);
        out[size_t((t * s.h + h) * s.r + e)] = acc;
      }
  }
  return out;
}

TEST(CudaMlaAbsorb, AbsorbedQueriesEqualTheCpuBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (const Shape s : {Shape{64, 256, 256, 512}, Shape{3, 20, 12, 64}}) {
    const auto kv_b = bf16_weights(s, 50);
    auto dw = to_device(kv_b);
    const int64_t max_t = 200;
    const auto q = uniform(51, size_t(max_t) * s.h * s.dn, 0.0f, 1.0f);
    auto dq = to_device(q);
    for (int64_t t :
         {1, 3, 16, 17, 32, 200}) {  // the decode kernel to 16, then 32- and 64-row tiles
      const auto want = absorb_reference(s, q, t, kv_b);
      cuda::DeviceBuffer dqt(want.size() * 4);
      cuda::mla_absorb_queries(static_cast<const float*>(dq.data()), t, s.h, s.dn, s.dv, s.r,
                               static_cast<const uint16_t*>(dw.data()),
                               static_cast<float*>(dqt.data()), nullptr);
      const auto got = to_host<float>(dqt, want.size());
      EXPECT_EQ(mismatches(got, want), 0u)
          << "T " << t << " H " << s.h << " nmse " << nmse(got, want);
    }
  }
}

TEST(CudaMlaAbsorb, UpProjectedValuesEqualTheCpuBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  ThreadPool pool(int(std::thread::hardware_concurrency()));
  for (const Shape s : {Shape{64, 256, 256, 512}, Shape{3, 20, 12, 64}}) {
    const auto kv_b = bf16_weights(s, 52);
    auto dw = to_device(kv_b);
    const int64_t max_t = 200;
    const auto o_bar = uniform(53, size_t(max_t) * s.h * s.r, 0.0f, 1.0f);
    auto dob = to_device(o_bar);
    const Linear w{DType::kBF16, int64_t(s.h) * (s.dn + s.dv), s.r, kv_b.data()};
    for (int64_t t : {1, 3, 32, 200}) {
      // The CPU layer's o: cpu::linear_slice over W_vb,h per head.
      std::vector<float> want(size_t(t) * s.h * s.dv);
      for (int h = 0; h < s.h; ++h) {
        const int64_t v0 = int64_t(h) * (s.dn + s.dv) + s.dn;
        cpu::linear_slice(&o_bar[size_t(h) * s.r], int64_t(s.h) * s.r, t, w, v0, v0 + s.dv,
                          &want[size_t(h) * s.dv], int64_t(s.h) * s.dv, pool);
      }
      cuda::DeviceBuffer d_o(want.size() * 4), d_o16(want.size() * 2);
      cuda::mla_up_values(static_cast<const float*>(dob.data()), t, s.h, s.dn, s.dv, s.r,
                          static_cast<const uint16_t*>(dw.data()), static_cast<float*>(d_o.data()),
                          static_cast<uint16_t*>(d_o16.data()), nullptr);
      const auto got = to_host<float>(d_o, want.size());
      const auto got16 = to_host<uint16_t>(d_o16, want.size());
      EXPECT_EQ(mismatches(got, want), 0u)
          << "T " << t << " H " << s.h << " nmse " << nmse(got, want);
      size_t bad16 = 0;
      for (size_t i = 0; i < want.size(); ++i) bad16 += got16[i] != f32_to_bf16(want[i]);
      EXPECT_EQ(bad16, 0u) << "BF16 copy, T " << t << " H " << s.h;
    }
  }
}

}  // namespace
}  // namespace sparkglm
