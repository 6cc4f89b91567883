// --precision-mode spark's device operators (issue 15, MODEL.md section 7): the device's FP4
// rounding of activations equals the CPU's round_trip_nvfp4 bit for bit (zeros, FP32 subnormals,
// E4M3-subnormal block scales, saturation, ties, short last blocks); the device's NVFP4
// conversion of a stored projection (BF16, MXFP8, FP8 block) writes the CPU quantizer's bytes;
// moe_experts_spark matches cpu::swiglu_forward with fp4 activation scales (BF16 and NVFP4
// routed experts) within kSparkMoeTolerance and keeps a token's bits whatever tokens share its
// step. The runner in spark: spark_runner_cuda_test.cpp.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "engine/backend/cpu/mlp.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/device_quantizer.h"
#include "engine/backend/cuda/fp4_activation.h"
#include "engine/backend/cuda/moe_experts.h"
#include "engine/backend/cuda/moe_quant_table.h"
#include "engine/backend/cuda/spark_moe.h"
#include "engine/core/dtype.h"
#include "engine/core/thread_pool.h"
#include "engine/model/weight_quantizer.h"
#include "engine/model/weights.h"
#include "tests/cuda/cuda_test_support.h"
#include "tests/cuda/moe_decode_workspace.h"

namespace sparkglm {
namespace {

using cuda_test::have_device;
using cuda_test::nmse;
using cuda_test::to_device;
using cuda_test::to_host;
using cuda_test::uniform;

// moe_experts_spark against the CPU experts on the same FP32 inputs: the routed codes agree
// except where accumulation order (2^-24 relative) moves h across a boundary; the shared expert
// reads BF16 x (2^-9 relative).
constexpr double kSparkMoeTolerance = 1e-4;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// ---- the activation rounding -------------------------------------------------------------------

TEST(SparkFp4Activations, DeviceRoundTripEqualsTheCpusBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t kRows = 64, kN = 200;  // 12 whole blocks and a short one of 8 per row
  std::vector<float> x(size_t(kRows * kN)), scale_2(kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    // Global scales from 1e-6 to 10 (E4M3 block scales saturate or go subnormal at the ends).
    scale_2[size_t(r)] = std::pow(10.0f, -6.0f + 7.0f * float(r) / float(kRows - 1));
    const std::vector<float> u = uniform(7000 + uint64_t(r), size_t(kN), 0.0f, 1.0f);
    for (int64_t i = 0; i < kN; ++i) {
      float v = u[size_t(i)] * std::pow(10.0f, float((r + i) % 9) - 4.0f);
      switch ((r * 7 + i) % 23) {
        case 0:
          v = 0.0f;
          break;
        case 1:
          v = -0.0f;
          break;
        case 2:
          v = std::numeric_limits<float>::denorm_min() * float(1 + i);
          break;  // FP32 subnormal
        case 3:
          v = -std::numeric_limits<float>::min() / 3.0f;
          break;
        case 4:
          v = 3.0e38f;
          break;  // saturates every block it lands in
        case 5:
          v = -1.0e30f;
          break;
        default:
          break;
      }
      x[size_t(r * kN + i)] = v;
    }
  }
  // Exact ties of the E2M1 grid: a block of 16 whose amax is 6 * d, values at 0.25, 0.75, 2.5,
  // 5 times d (halfway between codes), with d = e4m3(1) * scale_2.
  for (int64_t r = 0; r < 8; ++r) {
    const float d = scale_2[size_t(r)];
    const float ties[16] = {6,      0.25f,  0.75f, 1.25f, 1.75f, 2.5f, 3.5f,  5,
                            -0.25f, -0.75f, -2.5f, -5,    0.5f,  1,    -1.5f, 4};
    for (int i = 0; i < 16; ++i) x[size_t(r * kN + i)] = ties[i] * d;
  }
  std::vector<float> want = x;
  for (int64_t r = 0; r < kRows; ++r)
    round_trip_nvfp4(want.data() + r * kN, kN, scale_2[size_t(r)]);

  cuda::DeviceBuffer dx = to_device(x), ds = to_device(scale_2);
  cuda::DeviceBuffer dv(x.size() * sizeof(float)), dq(x.size() * sizeof(uint16_t));
  cuda::fp4_round_trip_rows(static_cast<const float*>(dx.data()), kRows, kN,
                            static_cast<const float*>(ds.data()), static_cast<float*>(dv.data()),
                            static_cast<uint16_t*>(dq.data()), nullptr);
  const std::vector<float> got = to_host<float>(dv, x.size());
  const std::vector<uint16_t> q = to_host<uint16_t>(dq, x.size());
  int64_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t r = int64_t(i) / kN;
    if (bits(got[i]) != bits(want[i]) && ++mismatches <= 8)
      ADD_FAILURE() << "row " << r << " col " << int64_t(i) % kN << ": x " << x[i] << " device "
                    << got[i] << " cpu " << want[i];
    // q is exact in BF16 and carries the whole value but the global scale.
    EXPECT_EQ(bits(bf16_to_f32(q[i]) * scale_2[size_t(r)]), bits(want[i])) << "q at " << i;
  }
  EXPECT_EQ(mismatches, 0);
}

// ---- the weight conversion ---------------------------------------------------------------------

TEST(SparkConversion, DeviceNvfp4OfAStoredProjectionEqualsTheCpuQuantizer) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  constexpr int64_t R = 256, C = 384;
  const std::vector<float> w = uniform(4242, size_t(R * C), 0.01f, 0.2f);
  for (int source = 0; source < 3; ++source) {  // BF16, MXFP8, FP8 block
    std::vector<float> value(w.size());         // the FP32 values the CPU converts
    cuda::DeviceBuffer data, scale, scale_inv;
    Linear l;
    l.rows = R;
    l.cols = C;
    if (source == 0) {
      std::vector<uint16_t> b(w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        b[i] = f32_to_bf16(w[i]);
        value[i] = bf16_to_f32(b[i]);
      }
      data = to_device(b);
      l.dtype = DType::kBF16;
    } else if (source == 1) {
      const Mxfp8Weight q = quantize_mxfp8(w.data(), R, C, "test");
      for (size_t i = 0; i < w.size(); ++i)
        value[i] = e4m3_to_f32(q.values[i]) * e8m0_to_f32(q.scale[i / 32]);
      data = to_device(q.values);
      scale = to_device(q.scale);
      l.dtype = DType::kF8E4M3;
      l.format = LinearFormat::kMxfp8;
    } else {
      const BlockFp8Weight q = quantize_block_fp8(w.data(), R, C, "test");
      const int64_t sc = (C + 127) / 128;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c)
          value[size_t(r * C + c)] = e4m3_to_f32(q.values[size_t(r * C + c)]) *
                                     q.scale_inv[size_t((r / 128) * sc + c / 128)];
      data = to_device(q.values);
      scale_inv = to_device(q.scale_inv);
      l.dtype = DType::kF8E4M3;
      l.format = LinearFormat::kFp8Block;
    }
    l.data = data.data();
    l.scale = static_cast<const uint8_t*>(scale.data());
    l.scale_inv = static_cast<const float*>(scale_inv.data());
    const Nvfp4Weight want = quantize_nvfp4(value.data(), R, C, "test");
    cuda::DeviceBuffer packed(want.packed.size()), scales(want.scale.size());
    const float scale_2 = cuda::quantize_linear_nvfp4(
        l, static_cast<uint8_t*>(packed.data()), static_cast<uint8_t*>(scales.data()), nullptr);
    EXPECT_EQ(bits(scale_2), bits(want.scale_2)) << "source " << source;
    EXPECT_EQ(to_host<uint8_t>(packed, want.packed.size()), want.packed) << "source " << source;
    EXPECT_EQ(to_host<uint8_t>(scales, want.scale.size()), want.scale) << "source " << source;
  }
}

// ---- the MoE -----------------------------------------------------------------------------------

// An NVFP4 projection on the device and its dequantized FP32 values on the host.
struct Nvfp4Proj {
  cuda::DeviceBuffer packed, scale;
  Linear device;
  std::vector<float> dense;
  Linear host() const { return Linear{DType::kF32, device.rows, device.cols, dense.data()}; }
};

Nvfp4Proj nvfp4_proj(int64_t rows, int64_t cols, uint64_t key) {
  const std::vector<float> w = uniform(key, size_t(rows * cols), 0.0f, 0.08f);
  const Nvfp4Weight q = quantize_nvfp4(w.data(), rows, cols, "test");
  Nvfp4Proj p;
  p.dense = w;
  round_trip_nvfp4(p.dense.data(), rows * cols, q.scale_2);  // the dequantized values
  p.packed = to_device(q.packed);
  p.scale = to_device(q.scale);
  p.device = Linear{DType::kU8, rows, cols, p.packed.data()};
  p.device.format = LinearFormat::kNvfp4;
  p.device.scale = static_cast<const uint8_t*>(p.scale.data());
  p.device.global_scale = q.scale_2;
  return p;
}

// E experts of D = W = 512 (the decode kernels' multiple), k = 3, a shared expert in NVFP4 (as
// spark converts it), T tokens with one empty slot; routed experts BF16 or NVFP4.
struct SparkMoe {
  static constexpr int E = 5, k = 3;
  static constexpr int64_t D = 512, W = 512;
  static constexpr float kLimit = 1.5f;
  bool nvfp4;
  std::vector<Nvfp4Proj> q;                   // NVFP4: [e][gate, up, down]
  std::vector<cuda::DeviceBuffer> bf16;       // BF16: [e][gate_up, down]
  std::vector<std::vector<float>> bf16_host;  // [e][gate, up, down] FP32 of the BF16 values
  std::vector<Nvfp4Proj> shared;              // gate, up, down
  MoeWeights device_moe;
  std::optional<cuda::MoeQuantTable> table;
  cuda::DeviceBuffer pointers, scales_dev;
  std::vector<Fp4ActivationScales> scales;

  explicit SparkMoe(bool use_nvfp4) : nvfp4(use_nvfp4) {
    for (int e = 0; e < E; ++e) {
      const uint64_t key = 100 + 10 * uint64_t(e);
      if (nvfp4) {
        q.push_back(nvfp4_proj(W, D, key));
        q.push_back(nvfp4_proj(W, D, key + 1));
        q.push_back(nvfp4_proj(D, W, key + 2));
      } else {
        std::vector<uint16_t> gu(size_t(2 * W * D)), dn(size_t(D * W));
        std::vector<float> g(size_t(W * D)), u(size_t(W * D)), d(size_t(D * W));
        const std::vector<float> a = uniform(key, gu.size(), 0.0f, 0.08f);
        const std::vector<float> b = uniform(key + 2, dn.size(), 0.0f, 0.08f);
        for (size_t i = 0; i < gu.size(); ++i) {
          gu[i] = f32_to_bf16(a[i]);
          (i < g.size() ? g[i] : u[i - g.size()]) = bf16_to_f32(gu[i]);
        }
        for (size_t i = 0; i < dn.size(); ++i) {
          dn[i] = f32_to_bf16(b[i]);
          d[i] = bf16_to_f32(dn[i]);
        }
        bf16.push_back(to_device(gu));
        bf16.push_back(to_device(dn));
        bf16_host.push_back(std::move(g));
        bf16_host.push_back(std::move(u));
        bf16_host.push_back(std::move(d));
      }
      // Inputs of +-2 and h of order 1: global scales near amax / (6 * 448), one per expert.
      scales.push_back(
          {2.0f / 2688.0f * (1.0f + 0.1f * float(e)), 2.5f / 2688.0f * (1.0f + 0.2f * float(e))});
    }
    shared.push_back(nvfp4_proj(W, D, 900));
    shared.push_back(nvfp4_proj(W, D, 901));
    shared.push_back(nvfp4_proj(D, W, 902));
    if (nvfp4) {
      for (int e = 0; e < E; ++e)
        device_moe.experts.push_back(
            {q[size_t(3 * e)].device, q[size_t(3 * e + 1)].device, q[size_t(3 * e + 2)].device});
      table = cuda::MoeQuantTable::build(device_moe, D, W);
    } else {
      std::vector<const void*> p;
      for (int e = 0; e < E; ++e) p.push_back(bf16[size_t(2 * e)].data());
      for (int e = 0; e < E; ++e) p.push_back(bf16[size_t(2 * e + 1)].data());
      pointers = to_device(p);
    }
    std::vector<float> s;
    for (const auto& x : scales) s.push_back(x.gate_up);
    for (const auto& x : scales) s.push_back(x.down);
    scales_dev = to_device(s);
  }

  SwiGluWeights host_expert(int e) const {
    if (nvfp4)
      return {q[size_t(3 * e)].host(), q[size_t(3 * e + 1)].host(), q[size_t(3 * e + 2)].host()};
    const auto& h = bf16_host;
    return {Linear{DType::kF32, W, D, h[size_t(3 * e)].data()},
            Linear{DType::kF32, W, D, h[size_t(3 * e + 1)].data()},
            Linear{DType::kF32, D, W, h[size_t(3 * e + 2)].data()}};
  }

  // The experts of token t (rank 1 of token 2 empty) and their weights.
  static int expert_of(int64_t t, int r) {
    return t == 2 && r == 1 ? -1 : int((t * 2 + r * 3) % E);
  }

  // cpu::moe_forward's per-token sum: ranks in order (FP4 activations), then the shared expert.
  std::vector<float> cpu(const std::vector<float>& x, int64_t T,
                         const std::vector<float>& wts) const {
    ThreadPool pool(1);
    std::vector<float> out(size_t(T * D), 0.0f), y(static_cast<size_t>(D));
    const SwiGluWeights sh{shared[0].host(), shared[1].host(), shared[2].host()};
    for (int64_t t = 0; t < T; ++t) {
      float* o = out.data() + t * D;
      for (int r = 0; r < k; ++r) {
        const int e = expert_of(t, r);
        if (e < 0) continue;
        cpu::swiglu_forward(host_expert(e), x.data() + t * D, 1, y.data(), pool, kLimit,
                            &scales[size_t(e)]);
        for (int64_t d = 0; d < D; ++d) o[d] += wts[size_t(t * k + r)] * y[size_t(d)];
      }
      cpu::swiglu_forward(sh, x.data() + t * D, 1, y.data(), pool, kLimit);
      for (int64_t d = 0; d < D; ++d) o[d] += y[size_t(d)];
    }
    return out;
  }

  // moe_experts_spark over tokens [t0, t0 + T) of x.
  std::vector<float> gpu(const std::vector<float>& x, int64_t t0, int64_t T,
                         const std::vector<float>& wts) const {
    std::vector<float> xs(x.begin() + t0 * D, x.begin() + (t0 + T) * D);
    std::vector<uint16_t> xb(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) xb[i] = f32_to_bf16(xs[i]);
    std::vector<int32_t> ex;
    std::vector<float> w;
    for (int64_t t = t0; t < t0 + T; ++t)
      for (int r = 0; r < k; ++r) {
        ex.push_back(expert_of(t, r));
        w.push_back(wts[size_t(t * k + r)]);
      }
    cuda::DeviceBuffer dx = to_device(xs), dxb = to_device(xb), dex = to_device(ex),
                       dw = to_device(w);
    const cuda_test::MoeDecodeWorkspace ws(T, k, D, W);
    cuda::DeviceBuffer xq(size_t(T * k * D) * 2), gu(size_t(T * k * 2 * W) * 4);
    cuda::SparkMoeArgs s;
    cuda::MoeExpertArgs& a = s.a;
    a.tokens = T;
    a.top_k = k;
    a.n_experts = E;
    a.hidden = D;
    a.width = W;
    a.clamp_limit = kLimit;
    a.x = static_cast<const uint16_t*>(dxb.data());
    a.experts = static_cast<const int32_t*>(dex.data());
    a.weights = static_cast<const float*>(dw.data());
    if (!nvfp4) {
      const auto* p = static_cast<const uint16_t* const*>(pointers.data());
      a.gate_up = p;
      a.down = p + E;
    }
    ws.fill(a);
    s.quant = nvfp4 ? &table->experts() : nullptr;
    s.x_f32 = static_cast<const float*>(dx.data());
    s.scales = static_cast<const float*>(scales_dev.data());
    s.shared_gate = &shared[0].device;
    s.shared_up = &shared[1].device;
    s.shared_down = &shared[2].device;
    s.xq = static_cast<uint16_t*>(xq.data());
    s.gu = static_cast<float*>(gu.data());
    cuda::moe_experts_spark(s, nullptr);
    return to_host<float>(ws.out, size_t(T * D));
  }
};

void expect_spark_moe_matches_cpu(bool nvfp4) {
  const SparkMoe m(nvfp4);
  constexpr int64_t T = 11;
  const std::vector<float> x = uniform(31337, size_t(T * SparkMoe::D), 0.0f, 2.0f);
  const std::vector<float> wts = uniform(4711, size_t(T * SparkMoe::k), 0.5f, 0.4f);
  const std::vector<float> want = m.cpu(x, T, wts);
  const std::vector<float> got = m.gpu(x, 0, T, wts);
  const double e = nmse(got, want);
  std::printf("moe_experts_spark (%s routed experts) vs CPU: NMSE %.3g\n", nvfp4 ? "NVFP4" : "BF16",
              e);
  EXPECT_LT(e, kSparkMoeTolerance);
  // A token's bits do not depend on the tokens beside it: token 7 alone.
  const std::vector<float> alone = m.gpu(x, 7, 1, wts);
  for (int64_t d = 0; d < SparkMoe::D; ++d)
    ASSERT_EQ(bits(alone[size_t(d)]), bits(got[size_t(7 * SparkMoe::D + d)])) << "column " << d;
}

TEST(SparkMoe, Bf16RoutedExpertsMatchTheCpuWithFp4Activations) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  expect_spark_moe_matches_cpu(false);
}

TEST(SparkMoe, Nvfp4RoutedExpertsMatchTheCpuWithFp4Activations) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  expect_spark_moe_matches_cpu(true);
}

}  // namespace
}  // namespace sparkglm
