// The MoE over quantized experts (moe_quant_experts.h, moe_prefill_quant.h) against the CPU's
// SwiGLU experts over the dequantized FP32 weights: routed experts in NVFP4 (and MXFP8, FP8 block),
// the shared expert in FP8 block, built with the CPU quantizer and uploaded here (no loader).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cpu/mlp.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/moe_experts.h"
#include "engine/backend/cuda/moe_prefill.h"
#include "engine/backend/cuda/moe_prefill_quant.h"
#include "engine/backend/cuda/moe_quant_experts.h"
#include "engine/backend/cuda/moe_quant_table.h"
#include "engine/core/dtype.h"
#include "engine/core/error.h"
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

// One quantized projection on the device (its Linear) and its dequantized FP32 values on the host.
struct QuantProj {
  cuda::DeviceBuffer data, scale, scale_inv;
  Linear device;
  std::vector<float> dense;  // [rows, cols], weight_formats.h's dequantization
  Linear host() const { return Linear{DType::kF32, device.rows, device.cols, dense.data()}; }
};

QuantProj make_proj(LinearFormat f, int64_t rows, int64_t cols, uint64_t key, float half) {
  const std::vector<float> w = uniform(key, size_t(rows * cols), 0.0f, half);
  QuantProj p;
  p.dense.resize(w.size());
  Linear& l = p.device;
  l.rows = rows;
  l.cols = cols;
  l.format = f;
  if (f == LinearFormat::kNvfp4) {
    const Nvfp4Weight q = quantize_nvfp4(w.data(), rows, cols, "test nvfp4");
    p.data = to_device(q.packed);
    p.scale = to_device(q.scale);
    l.dtype = DType::kU8;
    l.global_scale = q.scale_2;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t nibble =
            uint8_t((q.packed[size_t(r * cols / 2 + c / 2)] >> (4 * (c & 1))) & 0xf);
        const float block = e4m3_to_f32(q.scale[size_t(r * cols / 16 + c / 16)]);
        const float v = e2m1_to_f32(nibble) * block;
        p.dense[size_t(r * cols + c)] = v * q.scale_2;
      }
  } else if (f == LinearFormat::kMxfp8) {
    const Mxfp8Weight q = quantize_mxfp8(w.data(), rows, cols, "test mxfp8");
    p.data = to_device(q.values);
    p.scale = to_device(q.scale);
    l.dtype = DType::kF8E4M3;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        p.dense[size_t(r * cols + c)] = e4m3_to_f32(q.values[size_t(r * cols + c)]) *
                                        e8m0_to_f32(q.scale[size_t(r * cols / 32 + c / 32)]);
  } else {
    const BlockFp8Weight q = quantize_block_fp8(w.data(), rows, cols, "test fp8 block");
    p.data = to_device(q.values);
    p.scale_inv = to_device(q.scale_inv);
    l.dtype = DType::kF8E4M3;
    const int64_t sc = (cols + 127) / 128;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        p.dense[size_t(r * cols + c)] = e4m3_to_f32(q.values[size_t(r * cols + c)]) *
                                        q.scale_inv[size_t((r / 128) * sc + c / 128)];
  }
  l.data = p.data.data();
  l.scale = static_cast<const uint8_t*>(p.scale.data());
  l.scale_inv = static_cast<const float*>(p.scale_inv.data());
  return p;
}

struct QuantExpert {
  QuantProj gate, up, down;
  SwiGluWeights device() const { return {gate.device, up.device, down.device}; }
  SwiGluWeights host() const { return {gate.host(), up.host(), down.host()}; }
};

// E routed experts in `routed`, a shared one in FP8 block; D = W = 512 by default (the decode
// kernels' multiple: one 128-k step a warp). Weights of +-0.08 over 512 inputs of +-2 make g, u of
// order 1, so the clamp at 1.5 bites.
struct QuantMoe {
  static constexpr int E = 6, k = 3;
  int64_t D = 512, W = 512;
  static constexpr float kLimit = 1.5f;
  std::vector<QuantExpert> experts;
  QuantExpert shared;
  MoeWeights device;
  std::optional<cuda::MoeQuantTable> table;

  explicit QuantMoe(LinearFormat routed, int64_t hidden = 512, int64_t width = 512)
      : D(hidden), W(width) {
    auto make = [&](LinearFormat f, uint64_t key) {
      QuantExpert x;
      x.gate = make_proj(f, W, D, key, 0.08f);
      x.up = make_proj(f, W, D, key + 1, 0.08f);
      x.down = make_proj(f, D, W, key + 2, 0.08f);
      return x;
    };
    for (int e = 0; e < E; ++e) experts.push_back(make(routed, 1000 + 10 * uint64_t(e)));
    shared = make(LinearFormat::kFp8Block, 2000);
    for (const QuantExpert& x : experts) device.experts.push_back(x.device());
    device.shared = shared.device();
    table = cuda::MoeQuantTable::build(device, D, W);
  }

  // cpu::moe_forward's sum for token t: ranks in order (empty slots skipped), then the shared
  // expert, each a cpu::swiglu_forward over the dequantized weights.
  std::vector<float> reference(const std::vector<float>& x, const std::vector<int32_t>& choice,
                               const std::vector<float>& weight, int64_t T) const {
    ThreadPool pool(1);
    std::vector<float> want(size_t(T * D), 0.0f), y(static_cast<size_t>(D));
    for (int64_t t = 0; t < T; ++t) {
      float* o = &want[size_t(t * D)];
      for (int r = 0; r < k; ++r) {
        const int e = choice[size_t(t * k + r)];
        if (e < 0 || e >= E) continue;
        cpu::swiglu_forward(experts[size_t(e)].host(), &x[size_t(t * D)], 1, y.data(), pool,
                            kLimit);
        for (int64_t d = 0; d < D; ++d) o[d] += weight[size_t(t * k + r)] * y[size_t(d)];
      }
      cpu::swiglu_forward(shared.host(), &x[size_t(t * D)], 1, y.data(), pool, kLimit);
      for (int64_t d = 0; d < D; ++d) o[d] += y[size_t(d)];
    }
    return want;
  }
};

// Token t's choices: experts (t + 2r) % 5 (expert 5 never runs), with empty slots (-1, and E).
struct Routing {
  std::vector<uint16_t> xb;  // [T, D] BF16
  std::vector<float> x;      // the same values in FP32
  std::vector<int32_t> experts;
  std::vector<float> weights;
  Routing(int64_t T, uint64_t key, int64_t D = 512) {
    const int k = QuantMoe::k;
    const std::vector<float> xf = uniform(key, size_t(T * D), 0.0f, 2.0f);
    for (float v : xf) {
      xb.push_back(f32_to_bf16(v));
      x.push_back(bf16_to_f32(xb.back()));
    }
    for (int64_t t = 0; t < T; ++t)
      for (int r = 0; r < k; ++r) {
        int32_t e = int32_t((t + 2 * r) % 5);
        if (t % 5 == 0 && r == 2) e = -1;
        if (t % 7 == 3 && r == 1) e = QuantMoe::E;
        experts.push_back(e);
        weights.push_back(0.2f + 0.01f * float(t) + 0.1f * float(r));
      }
  }
};

// The decode workspaces for up to T tokens, and a runner of moe_experts_decode_quantized over
// tokens [t0, t0 + n) of the device inputs.
struct DecodeRun {
  const QuantMoe& moe;
  cuda::DeviceBuffer x, experts, weights;
  cuda_test::MoeDecodeWorkspace ws;
  DecodeRun(const QuantMoe& m, const Routing& r, int64_t T)
      : moe(m),
        x(to_device(r.xb)),
        experts(to_device(r.experts)),
        weights(to_device(r.weights)),
        ws(T, QuantMoe::k, m.D, m.W) {}

  cuda::MoeExpertArgs args(int64_t t0, int64_t n) const {
    cuda::MoeExpertArgs a;
    a.tokens = n;
    a.top_k = QuantMoe::k;
    a.n_experts = QuantMoe::E;
    a.hidden = moe.D;
    a.width = moe.W;
    a.clamp_limit = QuantMoe::kLimit;
    a.x = static_cast<const uint16_t*>(x.data()) + t0 * moe.D;
    a.experts = static_cast<const int32_t*>(experts.data()) + t0 * QuantMoe::k;
    a.weights = static_cast<const float*>(weights.data()) + t0 * QuantMoe::k;
    ws.fill(a);
    return a;
  }

  std::vector<float> run(int64_t t0, int64_t n, cudaStream_t stream = nullptr,
                         cuda::QuantKernel kernel = cuda::QuantKernel::kCurrent) {
    cuda::moe_experts_decode_quantized(args(t0, n), moe.table->experts(), stream, kernel);
    return to_host<float>(ws.out, size_t(n * moe.D));
  }
};

const char* name(LinearFormat f) {
  return f == LinearFormat::kNvfp4 ? "NVFP4" : (f == LinearFormat::kMxfp8 ? "MXFP8" : "FP8 block");
}

TEST(CudaMoeQuant, DecodeMatchesTheCpuOverDequantizedWeightsAndIsBatchInvariant) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t T = 32, D = 512;
  for (LinearFormat f : {LinearFormat::kNvfp4, LinearFormat::kMxfp8, LinearFormat::kFp8Block}) {
    SCOPED_TRACE(name(f));
    const QuantMoe moe(f);
    const Routing r(T, 77);
    DecodeRun run(moe, r, T);
    const std::vector<float> all = run.run(0, T);
    const double err = nmse(all, moe.reference(r.x, r.experts, r.weights, T));
    std::printf("quantized MoE decode, routed %s + shared FP8 block: nmse %.3g vs CPU\n", name(f),
                err);
    // The weights are exact in the MMA; h enters the down projection as BF16 (as in the BF16
    // kernel), and the sums run in another order.
    EXPECT_LT(err, 1e-5);
    EXPECT_EQ(run.run(0, T), all);  // repeatable bit for bit

    // Token 5 alone, among 8 at two places, among 16: the same bits as among 32.
    auto row = [&](const std::vector<float>& v, int64_t i) {
      return std::vector<float>(v.begin() + i * D, v.begin() + (i + 1) * D);
    };
    const std::vector<float> want = row(all, 5);
    EXPECT_EQ(run.run(5, 1), want);
    EXPECT_EQ(row(run.run(0, 8), 5), want);
    EXPECT_EQ(row(run.run(2, 8), 3), want);
    EXPECT_EQ(row(run.run(4, 16), 1), want);
  }
}

TEST(CudaMoeQuant, DecodeReplaysFromACudaGraph) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t T = 32;
  const QuantMoe moe(LinearFormat::kNvfp4);
  const Routing r(T, 78);
  DecodeRun run(moe, r, T);
  const std::vector<float> eager = run.run(0, T);
  SPARKGLM_CUDA_CHECK(cudaMemset(run.ws.out.data(), 0, run.ws.out.bytes()));
  cudaStream_t stream = nullptr;
  SPARKGLM_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SPARKGLM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cuda::moe_experts_decode_quantized(run.args(0, T), moe.table->experts(), stream);
  SPARKGLM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  SPARKGLM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  SPARKGLM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(to_host<float>(run.ws.out, size_t(T * moe.D)), eager);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// The decode kernels against their 2026-12-02 baseline (QuantKernel::kBaseline): the same MMA
// sequence over the same BF16 weights, so the same bits, in every format, at the default
// geometry (one 128-k step a warp) and at one where each warp's quarter of k is 3 steps (gate/up,
// k = 1536) and 5 steps (down, k = 2560), so the pipelines run their tails. NaN E4M3 codes and
// E8M0 codes below 3 (which the new kernel rounds where the baseline truncated,
// moe_quant_experts.cu) are not in these weights: the quantizer emits neither for them.
TEST(CudaMoeQuant, DecodeKernelMatchesItsBaselineBitForBit) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const int64_t T = 32;
  for (LinearFormat f : {LinearFormat::kNvfp4, LinearFormat::kMxfp8, LinearFormat::kFp8Block}) {
    for (const auto& [D, W] : {std::pair<int64_t, int64_t>{512, 512}, {1536, 2560}}) {
      SCOPED_TRACE(std::string(name(f)) + " D " + std::to_string(D) + " W " + std::to_string(W));
      const QuantMoe moe(f, D, W);
      const Routing r(T, 81, D);
      DecodeRun run(moe, r, T);
      for (int64_t n : {int64_t(1), int64_t(8), T}) {
        const std::vector<float> now = run.run(0, n);
        const std::vector<float> base = run.run(0, n, nullptr, cuda::QuantKernel::kBaseline);
        EXPECT_EQ(now, base) << n << " tokens";
      }
      if (D != 512) {  // the wider geometry also against the CPU
        const double err = nmse(run.run(0, T), moe.reference(r.x, r.experts, r.weights, T));
        EXPECT_LT(err, 1e-5);
      }
    }
  }
}

TEST(CudaMoeQuant, PrefillMatchesTheCpuOverDequantizedWeights) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  // 50 tokens; chunks of 4 experts over E = 6 (a partial second chunk); expert 5 has no rows.
  const int64_t T = 50, D = 512, W = 512;
  const int E = QuantMoe::E, k = QuantMoe::k, chunk = 4;
  for (LinearFormat f : {LinearFormat::kNvfp4, LinearFormat::kFp8Block}) {
    SCOPED_TRACE(name(f));
    const QuantMoe moe(f);
    const Routing r(T, 79);
    auto d_x = to_device(r.xb), d_e = to_device(r.experts), d_w = to_device(r.weights);
    cuda::DeviceBuffer ws(cuda::moe_prefill_workspace_bytes(T, k, E, D, W));
    cuda::DeviceBuffer scratch(cuda::moe_prefill_quant_scratch_bytes(chunk, D, W));
    cuda::DeviceBuffer out(size_t(T * D) * 4);
    cuda::MoePrefillArgs a;
    a.tokens = T, a.top_k = k, a.n_experts = E, a.hidden = D, a.width = W;
    a.clamp_limit = QuantMoe::kLimit;
    a.x = static_cast<const uint16_t*>(d_x.data());
    a.experts = static_cast<const int32_t*>(d_e.data());
    a.weights = static_cast<const float*>(d_w.data());
    a.workspace = ws.data();
    a.out = static_cast<float*>(out.data());
    a.quant = &moe.table->experts();
    a.quant_scratch = scratch.data();
    a.quant_chunk = chunk;
    cuda::Gemm gemm;
    cuda::moe_experts_prefill(a, gemm, nullptr);
    const std::vector<float> got = to_host<float>(out, size_t(T * D));
    cuda::moe_experts_prefill(a, gemm, nullptr);
    EXPECT_EQ(to_host<float>(out, size_t(T * D)), got);  // repeatable bit for bit
    const double err = nmse(got, moe.reference(r.x, r.experts, r.weights, T));
    std::printf("quantized MoE prefill, routed %s + shared FP8 block: nmse %.3g vs CPU\n", name(f),
                err);
    // Each weight is rounded once to BF16 (<= 2^-9 relative) besides the BF16 h.
    EXPECT_LT(err, 1e-4);
  }
}

TEST(CudaMoeQuant, TableRefusesMixedFormats) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  QuantMoe moe(LinearFormat::kNvfp4);
  MoeWeights mixed = moe.device;
  mixed.experts[3].up = moe.shared.up.device;  // FP8 block among NVFP4
  EXPECT_THROW(cuda::MoeQuantTable::build(mixed, moe.D, moe.W), Error);
  mixed = moe.device;
  mixed.experts[2].down.rows = 256;
  EXPECT_THROW(cuda::MoeQuantTable::build(mixed, moe.D, moe.W), Error);
}

}  // namespace
}  // namespace sparkglm
