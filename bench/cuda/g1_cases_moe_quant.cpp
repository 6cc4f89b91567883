// G1 rows for the MoE experts of a decode batch in the FP4-Local layout of the published
// checkpoint: routed experts NVFP4, the shared expert FP8 block (MODEL.md section 7), at the G1
// model's geometry, quantized on the device from dummy weights (device_quantizer.h). A bank of
// 8 x top_k routed experts; token t takes experts 8t .. 8t + top_k - 1 (mod the bank), so every
// pair of a batch of up to 8 tokens has its own expert, as random routing over 288 experts
// nearly always gives. The current kernels are the row; the 2026-12-02 kernels
// (QuantKernel::kBaseline) are timed beside them as the peer "baseline" in the same run.
// Reference: cpu::swiglu_forward over the dequantized FP32 weights per (token, rank), combined in
// cpu::moe_forward's order, then the shared expert.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/cuda/g1_expert_bank.h"
#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/mlp.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_quantizer.h"
#include "engine/backend/cuda/moe_experts.h"
#include "engine/backend/cuda/moe_quant_experts.h"
#include "engine/backend/cuda/moe_quant_table.h"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/quantized_linear.h"
#include "engine/core/dtype.h"
#include "engine/model/weights.h"

namespace sparkglm::g1 {

namespace {

constexpr int kMaxTokens = 8;  // the widest batch: its rows are the invariance baseline

// One quantized projection on the device and its Linear (host view of device data).
struct DeviceProj {
  std::shared_ptr<cuda::DeviceBuffer> data, scale;
  Linear lin;
};

DeviceProj make_nvfp4(int64_t rows, int64_t cols, uint64_t key, float half, cudaStream_t s) {
  DeviceProj p;
  p.data = device_alloc(size_t(rows * cols / 2));
  p.scale = device_alloc(size_t(rows * cols / 16));
  const cuda::DummyMatrix m{rows, cols, key, 0.0f, half};
  const float gs = cuda::quantize_dummy_nvfp4(m, ptr<uint8_t>(p.data), ptr<uint8_t>(p.scale), s);
  p.lin = Linear{DType::kU8, rows, cols, p.data->data()};
  p.lin.format = LinearFormat::kNvfp4;
  p.lin.scale = ptr<uint8_t>(p.scale);
  p.lin.global_scale = gs;
  return p;
}

DeviceProj make_fp8_block(int64_t rows, int64_t cols, uint64_t key, float half, cudaStream_t s) {
  DeviceProj p;
  p.data = device_alloc(size_t(rows * cols));
  p.scale = device_alloc(size_t((rows + 127) / 128 * ((cols + 127) / 128)) * 4);
  const cuda::DummyMatrix m{rows, cols, key, 0.0f, half};
  cuda::quantize_dummy_fp8_block(m, ptr<uint8_t>(p.data), ptr<float>(p.scale), s);
  p.lin = Linear{DType::kF8E4M3, rows, cols, p.data->data()};
  p.lin.format = LinearFormat::kFp8Block;
  p.lin.scale_inv = ptr<float>(p.scale);
  return p;
}

// The FP32 weights the CPU reference multiplies: weight_formats.h's dequantization of `l`.
std::vector<float> dequantized(const Linear& l) {
  const int64_t n = l.rows * l.cols;
  std::vector<float> w(static_cast<size_t>(n));
  if (l.format == LinearFormat::kNvfp4) {
    std::vector<uint8_t> packed(size_t(n / 2)), scale(size_t(n / 16));
    SPARKGLM_CUDA_CHECK(cudaMemcpy(packed.data(), l.data, packed.size(), cudaMemcpyDeviceToHost));
    SPARKGLM_CUDA_CHECK(cudaMemcpy(scale.data(), l.scale, scale.size(), cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t nibble = uint8_t((packed[size_t(i / 2)] >> (4 * (i & 1))) & 0xf);
      w[size_t(i)] = (e2m1_to_f32(nibble) * e4m3_to_f32(scale[size_t(i / 16)])) * l.global_scale;
    }
  } else {
    const int64_t sc = (l.cols + 127) / 128;
    std::vector<uint8_t> values(static_cast<size_t>(n));
    std::vector<float> scale_inv(size_t((l.rows + 127) / 128 * sc));
    SPARKGLM_CUDA_CHECK(cudaMemcpy(values.data(), l.data, values.size(), cudaMemcpyDeviceToHost));
    SPARKGLM_CUDA_CHECK(
        cudaMemcpy(scale_inv.data(), l.scale_inv, scale_inv.size() * 4, cudaMemcpyDeviceToHost));
    for (int64_t r = 0; r < l.rows; ++r)
      for (int64_t c = 0; c < l.cols; ++c)
        w[size_t(r * l.cols + c)] = e4m3_to_f32(values[size_t(r * l.cols + c)]) *
                                    scale_inv[size_t((r / 128) * sc + c / 128)];
  }
  return w;
}

// cpu::swiglu_forward of one token over expert `e` (dequantized on the host for the call).
void expert_forward(const SwiGluWeights& e, const float* x, float* y, ThreadPool& pool,
                    float limit) {
  const std::vector<float> g = dequantized(e.gate), u = dequantized(e.up), d = dequantized(e.down);
  const SwiGluWeights host{Linear{DType::kF32, e.gate.rows, e.gate.cols, g.data()},
                           Linear{DType::kF32, e.up.rows, e.up.cols, u.data()},
                           Linear{DType::kF32, e.down.rows, e.down.cols, d.data()}};
  cpu::swiglu_forward(host, x, 1, y, pool, limit);
}

}  // namespace

void run_moe_quant_cases(Harness& h) {
  const ModelConfig& config = h.model();
  const ExpertShape geo = ExpertShape::of(config);
  const int64_t D = geo.hidden, W = geo.width;
  const int bank = kMaxTokens * geo.top_k;
  cudaStream_t s = h.stream();

  // Weights: half-widths sqrt(3 / fan-in), as the BF16 expert bank; keys per (expert, operand).
  const float in_half = std::sqrt(3.0f / float(D)), mid_half = std::sqrt(3.0f / float(W));
  std::vector<DeviceProj> projs;  // keeps the buffers
  MoeWeights moe;
  for (int e = 0; e < bank; ++e) {
    const uint64_t key = 0x9e37000000ull + uint64_t(e) * 4;
    projs.push_back(make_nvfp4(W, D, key, in_half, s));
    projs.push_back(make_nvfp4(W, D, key + 1, in_half, s));
    projs.push_back(make_nvfp4(D, W, key + 2, mid_half, s));
    const size_t i = projs.size() - 3;
    moe.experts.push_back({projs[i].lin, projs[i + 1].lin, projs[i + 2].lin});
  }
  projs.push_back(make_fp8_block(W, D, 0x5a5a00, in_half, s));
  projs.push_back(make_fp8_block(W, D, 0x5a5a01, in_half, s));
  projs.push_back(make_fp8_block(D, W, 0x5a5a02, mid_half, s));
  const size_t si = projs.size() - 3;
  moe.shared = SwiGluWeights{projs[si].lin, projs[si + 1].lin, projs[si + 2].lin};
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(s));
  const cuda::MoeQuantTable table = cuda::MoeQuantTable::build(moe, D, W);

  // Tokens, routing and the reference for the widest batch; a narrower batch is its first rows.
  const auto xb = to_bf16(host_uniform("moe_quant.x", kMaxTokens * D, 0.0f, 1.0f));
  const auto x = from_bf16(xb);
  std::vector<int32_t> experts(size_t(kMaxTokens * geo.top_k));
  std::vector<float> weights(experts.size());
  for (int t = 0; t < kMaxTokens; ++t)
    for (int r = 0; r < geo.top_k; ++r) {
      experts[size_t(t * geo.top_k + r)] = (kMaxTokens * t + r) % bank;
      weights[size_t(t * geo.top_k + r)] = 0.05f + 0.01f * float(r) + 0.002f * float(t);
    }
  std::vector<float> ref(size_t(kMaxTokens * D), 0.0f), y(static_cast<size_t>(D));
  for (int t = 0; t < kMaxTokens; ++t) {
    float* o = &ref[size_t(t * D)];
    for (int r = 0; r < geo.top_k; ++r) {
      const int e = experts[size_t(t * geo.top_k + r)];
      expert_forward(moe.experts[size_t(e)], &x[size_t(t * D)], y.data(), h.pool(),
                     config.swiglu_limit);
      for (int64_t d = 0; d < D; ++d) o[d] += weights[size_t(t * geo.top_k + r)] * y[size_t(d)];
    }
    expert_forward(*moe.shared, &x[size_t(t * D)], y.data(), h.pool(), config.swiglu_limit);
    for (int64_t d = 0; d < D; ++d) o[d] += y[size_t(d)];
  }

  auto d_x = upload(xb), d_e = upload(experts), d_w = upload(weights);
  auto d_h = device_alloc(size_t(kMaxTokens * geo.top_k * W * 2)),
       d_y = device_alloc(size_t(kMaxTokens * geo.top_k * D * 4));
  auto d_sgu = device_alloc(size_t(kMaxTokens * 2 * W * 4)),
       d_sh = device_alloc(size_t(kMaxTokens * W * 2));
  auto d_sy = device_alloc(size_t(kMaxTokens * D * 4)),
       d_out = device_alloc(size_t(kMaxTokens * D * 4));
  auto d_groups = device_alloc(size_t(cuda::moe_decode_group_ints(kMaxTokens, geo.top_k)) * 4);
  const cuda::QuantizedWeight shared_gate = cuda::quantized_weight(moe.shared->gate);
  const double routed_bytes = 3.0 * double(W) * double(D) * (0.5 + 1.0 / 16) + 3 * 4;
  const double shared_bytes =
      2 * shared_gate.bytes() + cuda::quantized_weight(moe.shared->down).bytes();
  const auto* q = &table.experts();
  for (int rows : {kMaxTokens, 1, 4}) {
    cuda::MoeExpertArgs a;
    a.tokens = rows;
    a.top_k = geo.top_k;
    a.n_experts = bank;
    a.groups = ptr<int32_t>(d_groups);
    a.hidden = D;
    a.width = W;
    a.clamp_limit = config.swiglu_limit;
    a.x = ptr<uint16_t>(d_x);
    a.experts = ptr<int32_t>(d_e);
    a.weights = ptr<float>(d_w);
    a.h = ptr<uint16_t>(d_h);
    a.y = ptr<float>(d_y);
    a.shared_gu = ptr<float>(d_sgu);
    a.shared_h = ptr<uint16_t>(d_sh);
    a.shared_y = ptr<float>(d_sy);
    a.out = ptr<float>(d_out);

    OperatorCase c;
    c.op = "moe.experts.nvfp4";
    c.shape = std::to_string(rows) + " tokens, " + geo.text() + ", routed NVFP4, shared FP8 block";
    c.rows = rows;
    c.decode = true;
    // The weights are exact in the MMA; h enters the down projection as BF16 (2^-9 relative), as
    // in the BF16 rows.
    c.tolerance = 1e-5;
    const double distinct = double(rows * geo.top_k);
    c.bytes = distinct * routed_bytes + shared_bytes + double(rows * D * 6);
    c.flops = double(rows) * (geo.top_k + 1) * 2.0 * double(3 * W * D);
    c.note = std::to_string(int(distinct)) +
             " distinct routed experts, each read once. Kernel (moe_quant_experts.cu): E2M1 "
             "pairs from a shared-memory table times the block scale in one BF16x2 FMA, gate "
             "and up streamed together 2 steps ahead (down 3), 12-16 warps an SM; peer "
             "'baseline' is the 2026-12-02 kernel (FP32 decode of each weight) in the same run. "
             "Not yet measured when written: the first H200 run says how far below the floor";
    c.launch = [a, q](cudaStream_t st) { cuda::moe_experts_decode_quantized(a, *q, st); };
    c.outputs.push_back({"out",
                         a.out,
                         rows * D,
                         false,
                         D,
                         std::vector<float>(ref.begin(), ref.begin() + rows * D),
                         {}});
    c.keep = {d_x, d_e, d_w, d_h, d_y, d_sgu, d_sh, d_sy, d_out, d_groups};
    h.run(c);
    h.add_peer("baseline", c.op, c.shape, [a, q](cudaStream_t st) {
      cuda::moe_experts_decode_quantized(a, *q, st, cuda::QuantKernel::kBaseline);
    });
  }
}

}  // namespace sparkglm::g1
