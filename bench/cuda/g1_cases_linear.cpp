// G1 rows for the BF16 projections: gemv_bf16 for decode rows, cuBLASLt for prefill chunks, with
// cuBLASLt timed beside each shape as the peer. Reference: cpu::linear on the same BF16 values.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/core/dtype.h"

namespace sparkglm::g1 {

namespace {

struct ProjectionShape {
  const char* name;
  int64_t n, k;  // W: [n, k]
};

// Rows of a prefill chunk checked on the CPU: the reference of every row at 8192 x 154880-wide
// shapes would take minutes on the device machine's 16 cores.
constexpr int kSampledRows = 16;

std::vector<int64_t> checked_rows(int64_t m) {
  std::vector<int64_t> rows;
  if (m <= 32) {
    for (int64_t i = 0; i < m; ++i) rows.push_back(i);
  } else {
    for (int i = 0; i < kSampledRows; ++i) rows.push_back(i * (m - 1) / (kSampledRows - 1));
  }
  return rows;
}

void run_shape(Harness& h, const ProjectionShape& s, const std::vector<int>& row_counts,
               bool decode) {
  const int64_t max_m = *std::max_element(row_counts.begin(), row_counts.end());
  auto w = device_alloc(size_t(s.n * s.k * 2));
  auto x = device_alloc(size_t(max_m * s.k * 2));
  auto y = device_alloc(size_t(max_m * s.n * 4));
  // Variance 1/k keeps outputs of order one, like the dummy checkpoint's projections.
  cuda::fill_dummy_bf16(ptr<uint16_t>(w), s.n * s.k, 0x5eed0000u + uint64_t(s.n * 7 + s.k), 0.0f,
                        std::sqrt(3.0f / float(s.k)), h.stream());
  cuda::fill_dummy_bf16(ptr<uint16_t>(x), max_m * s.k, 0xa11ce000u + uint64_t(s.k), 0.0f, 1.0f,
                        h.stream());
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(h.stream()));
  std::vector<uint16_t> w_host(size_t(s.n * s.k)), x_host(size_t(max_m * s.k));
  w->copy_to_host(w_host.data(), w_host.size() * 2);
  x->copy_to_host(x_host.data(), x_host.size() * 2);
  const Linear lin{DType::kBF16, s.n, s.k, w_host.data()};

  for (int m : row_counts) {
    OperatorCase c;
    c.op = std::string("linear.") + s.name;
    c.shape = "x[" + std::to_string(m) + "," + std::to_string(s.k) + "] W[" + std::to_string(s.n) +
              "," + std::to_string(s.k) + "] bf16 -> f32";
    c.rows = m;
    c.decode = decode;
    // FP32 accumulation of exact BF16 products in another order: 1e-14 to 3e-10 seen (cuBLASLt
    // at k = 16384 the highest); 1e-9 still rejects any wrong or missing term.
    c.tolerance = 1e-9;
    c.bytes = double(s.n * s.k * 2 + m * s.k * 2 + m * s.n * 4);
    c.flops = 2.0 * double(m) * double(s.n) * double(s.k);
    c.note = m <= cuda::kGemvMaxRows
                 ? "gemv_bf16 (own tensor-core kernel); why under the HBM floor: every row count "
                   "up to 32 runs this one kernel so a row's bits never depend on its batch "
                   "(cuBLAS picks kernels by M, hence faster here but batch-variant); a warp "
                   "loads 64 B of each of 16 rows per instruction (~60 % of HBM on large weights "
                   "where cuBLAS streams ~95 %), and launch, ramp and the split-k sum cost ~8 us "
                   "a call, most of a 32-64 MB operand's time"
                 : "Gemm::prefill (own fixed-tile tensor-core GEMM, mma.sync + cp.async, no "
                   "split-K): a row's bits do not depend on how many rows share the product, so a "
                   "prompt computes the same however the scheduler cut it; the cuBLAS peer row "
                   "beside it is the fastest batch-variant choice (it picks kernels by M), and the "
                   "ratio of the two is what invariance costs";
    const std::vector<int64_t> rows = checked_rows(m);
    if (m > 32) c.note += "; CPU reference on " + std::to_string(rows.size()) + " sampled rows";
    cuda::Gemm& g = h.gemm();
    const uint16_t* xp = ptr<uint16_t>(x);
    const uint16_t* wp = ptr<uint16_t>(w);
    float* yp = ptr<float>(y);
    // Decode rows take the weight-streaming GEMV, prefill rows the fixed-tile GEMM (gemm.h).
    c.launch = [&g, xp, wp, yp, m, s, decode](cudaStream_t st) {
      if (decode) {
        g.decode(xp, m, wp, s.n, s.k, yp, st);
      } else {
        g.prefill(xp, m, wp, s.n, s.k, yp, st);
      }
    };
    CaseOutput out{"y", yp, int64_t(m) * s.n, false, s.n, {}, {}};
    std::vector<float> xs(rows.size() * size_t(s.k));
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t i = 0; i < s.k; ++i)
        xs[r * size_t(s.k) + size_t(i)] = bf16_to_f32(x_host[size_t(rows[r] * s.k + i)]);
    out.reference.resize(rows.size() * size_t(s.n));
    cpu::linear(xs.data(), int64_t(rows.size()), lin, out.reference.data(), h.pool());
    for (int64_t r : rows)
      for (int64_t i = 0; i < s.n; ++i) out.checked.push_back(r * s.n + i);
    c.outputs.push_back(std::move(out));
    h.run(c);
    h.add_peer("cublas", c.op, c.shape, [&g, xp, wp, yp, m, s](cudaStream_t st) {
      g.cublaslt(xp, m, wp, s.n, s.k, yp, st);
    });
  }
}

}  // namespace

void run_linear_cases(Harness& h) {
  const std::vector<int> decode(std::begin(kDecodeRows), std::end(kDecodeRows));
  std::vector<int> prefill(std::begin(kPrefillRows), std::end(kPrefillRows));
  if (h.quick()) prefill.pop_back();
  // [n, k] of each projection, from the G1 model's geometry.
  const ModelConfig& m = h.model();
  const int64_t d = m.hidden_size, kda_hk = int64_t(m.kda.num_heads) * m.kda.head_dim;
  const int64_t mla_q = int64_t(m.num_attention_heads) * m.qk_nope_head_dim;
  const int64_t mla_v = int64_t(m.num_attention_heads) * m.v_head_dim;
  const ProjectionShape decode_shapes[] = {
      {"kda_qkv", kda_hk, d},                     // W_q / W_k / W_v of a KDA layer
      {"mla_q_b", mla_q, m.q_lora_rank},          // q_b_proj: heads x qk head dim, q LoRA rank
      {"dense_down", d, m.intermediate_size},     // dense MLP down
      {"expert_up", m.moe_intermediate_size, d},  // one routed expert's gate or up
      {"lm_head", m.vocab_size, d},               // the LM head
  };
  for (const auto& s : decode_shapes) run_shape(h, s, decode, true);
  const ProjectionShape prefill_shapes[] = {
      {"kda_qkv", kda_hk, d},
      {"dense_up", m.intermediate_size, d},
      {"mla_o", d, mla_v},
  };
  for (const auto& s : prefill_shapes) run_shape(h, s, prefill, false);
}

}  // namespace sparkglm::g1
