// G1 rows for the BF16 projections: gemv_bf16 for decode rows, cuBLASLt for prefill chunks, with
// cuBLASLt timed beside each shape as the peer. Reference: cpu::linear on the same BF16 values.
// And the decode GEMV over the checkpoint's quantized formats (quantized_gemv: NVFP4, MXFP8,
// FP8 block), each at glm-5.3-flash projections stored in that format, with the BF16 GEMV and
// cuBLASLt on the dequantized weights rounded to BF16 as peers; and prefill rows (512-8192) of
// one projection per format through project_prefill (dequantize to BF16, then Gemm::prefill).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dummy_weights.h"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/quantized_linear.h"
#include "engine/core/dtype.h"
#include "engine/model/tensor_source.h"
#include "engine/model/weight_formats.h"
#include "engine/model/weight_quantizer.h"
#include "engine/model/weights.h"

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

// The output y [m, n] checked on `rows` only: the reference is cpu::linear of those rows of the
// BF16 x [m, k] by `w`.
CaseOutput sampled_output(Harness& h, float* y, int64_t m, int64_t n, int64_t k,
                          const std::vector<uint16_t>& x_host, const std::vector<int64_t>& rows,
                          const Linear& w) {
  CaseOutput out{"y", y, m * n, false, n, {}, {}};
  std::vector<float> xs(rows.size() * size_t(k));
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t i = 0; i < k; ++i)
      xs[r * size_t(k) + size_t(i)] = bf16_to_f32(x_host[size_t(rows[r] * k + i)]);
  out.reference.resize(rows.size() * size_t(n));
  cpu::linear(xs.data(), int64_t(rows.size()), w, out.reference.data(), h.pool());
  for (int64_t r : rows)
    for (int64_t i = 0; i < n; ++i) out.checked.push_back(r * n + i);
  return out;
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
                 ? "gemv_bf16 (own tensor-core kernels with the same bits: weights of 32 MiB or "
                   "more streamed through shared memory by cp.async, 512 B a row a stage, by "
                   "resident blocks; smaller ones loaded into registers, all at once; peers "
                   "stream and registers: each kernel alone); a row's bits never depend on its "
                   "batch (cuBLAS picks kernels by M, hence batch-variant); why under the HBM "
                   "floor: a launch, the first stage's latency and the grid's tail are most of a "
                   "16-100 MB weight's time (the LM head streams at ~99 % at 1 row)"
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
    c.outputs.push_back(sampled_output(h, yp, m, s.n, s.k, x_host, rows, lin));
    h.run(c);
    h.add_peer("cublas", c.op, c.shape, [&g, xp, wp, yp, m, s](cudaStream_t st) {
      g.cublaslt(xp, m, wp, s.n, s.k, yp, st);
    });
    if (decode) {  // the two kernels kAuto chooses between by the weight's bytes
      h.add_peer("stream", c.op, c.shape, [&g, xp, wp, yp, m, s](cudaStream_t st) {
        g.decode(xp, m, wp, s.n, s.k, yp, st, cuda::GemvKernel::kStream);
      });
      h.add_peer("registers", c.op, c.shape, [&g, xp, wp, yp, m, s](cudaStream_t st) {
        g.decode(xp, m, wp, s.n, s.k, yp, st, cuda::GemvKernel::kRegisters);
      });
    }
  }
}

struct QuantizedShape {
  const char* name;
  cuda::QuantFormat format;
  int64_t n, k;  // W: [n, k]
};

// W quantized by the CPU quantizer and its dequantize_linear FP32 values (the reference's W).
struct HostQuantized {
  std::vector<uint8_t> data, scale;
  std::vector<float> scale_inv, dense;
  float global_scale = 1.0f;
};

template <typename T>
void put(OwnedTensors& src, const std::string& name, DType dtype, std::vector<int64_t> shape,
         const std::vector<T>& values) {
  std::memcpy(src.add(name, dtype, std::move(shape)), values.data(), values.size() * sizeof(T));
}

// Rows [lo, hi) of W quantized and dequantized, written at their place in `q`. MXFP8 scales are
// per row and FP8-block scales per 128 rows, so slabs of a multiple of 128 rows quantize exactly
// as the whole tensor does; NVFP4's global scale spans the tensor, so it goes in one slab.
void quantize_slab(const QuantizedShape& s, const std::vector<float>& w, int64_t lo, int64_t hi,
                   HostQuantized& q) {
  const int64_t rows = hi - lo, k = s.k;
  const float* src_w = w.data() + lo * k;
  OwnedTensors src("g1");
  const std::string name = std::string(s.name) + ".weight";
  auto place = [](const auto& from, auto& to, int64_t at) {
    std::copy(from.begin(), from.end(), to.begin() + at);
  };
  if (s.format == cuda::QuantFormat::kNvfp4) {
    Nvfp4Weight t = quantize_nvfp4(src_w, rows, k, name);
    put(src, name, DType::kU8, {rows, k / 2}, t.packed);
    put(src, std::string(s.name) + ".weight_scale", DType::kF8E4M3, {rows, k / 16}, t.scale);
    put(src, std::string(s.name) + ".weight_scale_2", DType::kF32, {},
        std::vector<float>{t.scale_2});
    place(t.packed, q.data, lo * k / 2);
    place(t.scale, q.scale, lo * k / 16);
    q.global_scale = t.scale_2;
  } else if (s.format == cuda::QuantFormat::kMxfp8) {
    Mxfp8Weight t = quantize_mxfp8(src_w, rows, k, name);
    put(src, name, DType::kF8E4M3, {rows, k}, t.values);
    put(src, std::string(s.name) + ".weight_scale", DType::kF8E8M0, {rows, k / 32}, t.scale);
    place(t.values, q.data, lo * k);
    place(t.scale, q.scale, lo * k / 32);
  } else {
    BlockFp8Weight t = quantize_block_fp8(src_w, rows, k, name);
    const int64_t sc = (k + 127) / 128;
    put(src, name, DType::kF8E4M3, {rows, k}, t.values);
    put(src, std::string(s.name) + ".weight_scale_inv", DType::kF32, {(rows + 127) / 128, sc},
        t.scale_inv);
    place(t.values, q.data, lo * k);
    place(t.scale_inv, q.scale_inv, lo / 128 * sc);
  }
  place(dequantize_linear(src, name, rows, k), q.dense, lo * k);
}

HostQuantized quantize_for_g1(Harness& h, const QuantizedShape& s) {
  // Variance 1/k, as the BF16 rows' weights.
  const auto w = host_uniform(std::string("quantized.") + s.name, s.n * s.k, 0.0f,
                              std::sqrt(3.0f / float(s.k)));
  HostQuantized q;
  const size_t values = size_t(s.n * s.k);
  q.dense.resize(values);
  if (s.format == cuda::QuantFormat::kNvfp4) {
    q.data.resize(values / 2);
    q.scale.resize(values / 16);
    quantize_slab(s, w, 0, s.n, q);
    return q;
  }
  q.data.resize(values);
  if (s.format == cuda::QuantFormat::kMxfp8) {
    q.scale.resize(values / 32);
  } else {
    q.scale_inv.resize(size_t((s.n + 127) / 128 * ((s.k + 127) / 128)));
  }
  h.pool().parallel_for(s.n, 1024, [&](int64_t lo, int64_t hi) { quantize_slab(s, w, lo, hi, q); });
  return q;
}

void run_quantized_shape(Harness& h, const QuantizedShape& s) {
  const std::vector<int> row_counts(std::begin(kDecodeRows), std::end(kDecodeRows));
  const int64_t max_m = *std::max_element(row_counts.begin(), row_counts.end());
  const HostQuantized q = quantize_for_g1(h, s);
  auto data = upload(q.data);
  auto scale = q.scale.empty() ? nullptr : upload(q.scale);
  auto scale_inv = q.scale_inv.empty() ? nullptr : upload(q.scale_inv);
  auto w_bf16 = upload(to_bf16(q.dense));  // the peers' weights
  auto x = device_alloc(size_t(max_m * s.k * 2));
  auto y = device_alloc(size_t(max_m * s.n * 4));
  cuda::fill_dummy_bf16(ptr<uint16_t>(x), max_m * s.k, 0xa11ce000u + uint64_t(s.k), 0.0f, 1.0f,
                        h.stream());
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(h.stream()));
  std::vector<uint16_t> x_host(size_t(max_m * s.k));
  x->copy_to_host(x_host.data(), x_host.size() * 2);
  const std::vector<float> xs = from_bf16(x_host);

  cuda::QuantizedWeight qw;
  qw.format = s.format;
  qw.rows = s.n;
  qw.cols = s.k;
  qw.data = ptr<uint8_t>(data);
  if (scale) qw.scale = ptr<uint8_t>(scale);
  if (scale_inv) qw.scale_inv = ptr<float>(scale_inv);
  qw.global_scale = q.global_scale;
  const Linear lin{DType::kF32, s.n, s.k, q.dense.data()};
  std::vector<float> reference(size_t(max_m * s.n));
  cpu::linear(xs.data(), max_m, lin, reference.data(), h.pool());

  const std::string format = cuda::quant_format_name(s.format);
  for (int m : row_counts) {
    OperatorCase c;
    c.op = std::string("linear.") + s.name;
    c.shape = "x[" + std::to_string(m) + "," + std::to_string(s.k) + "] W[" + std::to_string(s.n) +
              "," + std::to_string(s.k) + "] " + format + " -> f32";
    c.rows = m;
    c.decode = true;
    // Both sides multiply the same BF16 x by the same FP32 weights (the device dequantizes to
    // dequantize_linear's bits) and accumulate in FP32 in different orders: as the BF16 rows,
    // 1e-9 leaves room for the order and rejects any wrong scale or missing term.
    c.tolerance = 1e-9;
    c.bytes = qw.bytes() + double(m * s.k * 2 + m * s.n * 4);
    c.flops = 2.0 * double(m) * double(s.n) * double(s.k);
    c.flops_on_tensor_cores = true;  // BF16 mma.sync, FP32 accumulate
    c.note = "quantized_gemv (" + format +
             " dequantized exactly to BF16 MMA fragments in registers, scales the fragments "
             "cannot carry applied in FP32 to each group's MMA sum; 16 W rows a block, k split "
             "over up to 8 warps, and over blocks for weights of few tiles, by the weight's "
             "shape; each warp streams its rows through shared memory with cp.async, a stage of "
             "8 groups in flight while it computes the previous; a fixed order over k): "
             "HBM-bound up to 32 rows. Peers: the 2026-12-02 kernel (8-byte fragment loads from "
             "global memory; the same bits), the current kernel without the split over blocks "
             "(unsplit), the BF16 GEMV and cuBLASLt on the dequantized weights rounded to BF16 "
             "(twice or more the bytes)";
    const uint16_t* xp = ptr<uint16_t>(x);
    float* yp = ptr<float>(y);
    // The split-k room the engine lends (projection.cu: Gemm's).
    const cuda::GemvPartials partials{h.gemm().split_partials(), h.gemm().split_partial_floats()};
    c.launch = [xp, m, qw, yp, partials](cudaStream_t st) {
      cuda::quantized_gemv(xp, m, qw, yp, st, cuda::QuantKernel::kCurrent, partials);
    };
    CaseOutput out{"y", yp, int64_t(m) * s.n, false, s.n, {}, {}};
    out.reference.assign(reference.begin(), reference.begin() + int64_t(m) * s.n);
    c.outputs.push_back(std::move(out));
    c.keep = {data, scale, scale_inv, x, y};
    h.run(c);
    cuda::Gemm& g = h.gemm();
    const uint16_t* wp = ptr<uint16_t>(w_bf16);
    h.add_peer("gemv_bf16", c.op, c.shape,
               [&g, xp, wp, yp, m, s](cudaStream_t st) { g.decode(xp, m, wp, s.n, s.k, yp, st); });
    h.add_peer("cublas_bf16", c.op, c.shape, [&g, xp, wp, yp, m, s](cudaStream_t st) {
      g.cublaslt(xp, m, wp, s.n, s.k, yp, st);
    });
    h.add_peer("baseline", c.op, c.shape, [xp, m, qw, yp, partials](cudaStream_t st) {
      cuda::quantized_gemv(xp, m, qw, yp, st, cuda::QuantKernel::kBaseline, partials);
    });
    // The current kernel with k split over each block's warps only (no room lent): what the split
    // over blocks gives a weight of few tiles (the same plan, so the same time, for the others).
    h.add_peer("unsplit", c.op, c.shape,
               [xp, m, qw, yp](cudaStream_t st) { cuda::quantized_gemv(xp, m, qw, yp, st); });
  }
}

// Prefill rows of a quantized weight: project_prefill dequantizes W into a BF16 workspace (each
// value weight_formats.h's FP32 value rounded to nearest even), then runs Gemm::prefill. The
// reference multiplies the same BF16 x by those BF16-rounded weights, so the row checks the
// dequantization bit for bit (1e-9 as the BF16 rows); against the unrounded FP32 weights the
// path adds one BF16 rounding per weight, |dw| <= 2^-9 |w| (projection.h).
void run_quantized_prefill_shape(Harness& h, const QuantizedShape& s,
                                 const std::vector<int>& row_counts) {
  const int64_t max_m = *std::max_element(row_counts.begin(), row_counts.end());
  const HostQuantized q = quantize_for_g1(h, s);
  auto data = upload(q.data);
  auto scale = q.scale.empty() ? nullptr : upload(q.scale);
  auto scale_inv = q.scale_inv.empty() ? nullptr : upload(q.scale_inv);
  const std::vector<uint16_t> w_rounded = to_bf16(q.dense);
  auto w_bf16 = upload(w_rounded);  // the cuBLAS peer's weights
  auto workspace = device_alloc(size_t(s.n * s.k * 2));
  auto x = device_alloc(size_t(max_m * s.k * 2));
  auto y = device_alloc(size_t(max_m * s.n * 4));
  cuda::fill_dummy_bf16(ptr<uint16_t>(x), max_m * s.k, 0xa11ce000u + uint64_t(s.k), 0.0f, 1.0f,
                        h.stream());
  SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(h.stream()));
  std::vector<uint16_t> x_host(size_t(max_m * s.k));
  x->copy_to_host(x_host.data(), x_host.size() * 2);
  const std::vector<float> w_ref = from_bf16(w_rounded);
  const Linear ref_w{DType::kF32, s.n, s.k, w_ref.data()};

  Linear w{DType::kBF16, s.n, s.k, data->data()};
  w.format = s.format == cuda::QuantFormat::kNvfp4   ? LinearFormat::kNvfp4
             : s.format == cuda::QuantFormat::kMxfp8 ? LinearFormat::kMxfp8
                                                     : LinearFormat::kFp8Block;
  if (scale) w.scale = ptr<uint8_t>(scale);
  if (scale_inv) w.scale_inv = ptr<float>(scale_inv);
  w.global_scale = q.global_scale;
  const cuda::DequantWorkspace ws{ptr<uint16_t>(workspace), s.n * s.k};
  const double weight_bytes = double(cuda::quantized_weight(w).bytes());

  const std::string format = cuda::quant_format_name(s.format);
  for (int m : row_counts) {
    OperatorCase c;
    c.op = std::string("linear.") + s.name;
    c.shape = "x[" + std::to_string(m) + "," + std::to_string(s.k) + "] W[" + std::to_string(s.n) +
              "," + std::to_string(s.k) + "] " + format + " -> f32";
    c.rows = m;
    c.decode = false;
    c.tolerance = 1e-9;
    // The floor counts the format's bytes once; the workspace's BF16 write and read (4 bytes a
    // weight) are this path's own cost, so they show as distance from the floor.
    c.bytes = weight_bytes + double(m * s.k * 2 + m * s.n * 4);
    c.flops = 2.0 * double(m) * double(s.n) * double(s.k);
    c.flops_on_tensor_cores = true;
    c.note = "project_prefill (" + format +
             " dequantized to a BF16 workspace, then Gemm::prefill: the fixed-tile tensor-core "
             "GEMM of the BF16 rows). Reference: the BF16-rounded dequantized weights, so the "
             "dequantization is checked bit for bit; against the FP32 weights the path adds one "
             "BF16 rounding a weight (|dw| <= 2^-9 |w|). Peer: cuBLASLt on those BF16 weights, "
             "without the dequantization";
    const std::vector<int64_t> rows = checked_rows(m);
    c.note += "; CPU reference on " + std::to_string(rows.size()) + " sampled rows";
    cuda::Gemm& g = h.gemm();
    const uint16_t* xp = ptr<uint16_t>(x);
    float* yp = ptr<float>(y);
    c.launch = [&g, ws, w, xp, m, yp](cudaStream_t st) {
      cuda::project_prefill(g, ws, w, xp, m, yp, st);
    };
    c.outputs.push_back(sampled_output(h, yp, m, s.n, s.k, x_host, rows, ref_w));
    c.keep = {data, scale, scale_inv, workspace, x, y};
    h.run(c);
    const uint16_t* wp = ptr<uint16_t>(w_bf16);
    h.add_peer("cublas_bf16", c.op, c.shape, [&g, xp, wp, yp, m, s](cudaStream_t st) {
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

void run_quantized_linear_cases(Harness& h) {
  const ModelConfig& m = h.model();
  const int64_t d = m.hidden_size, kda_hk = int64_t(m.kda.num_heads) * m.kda.head_dim;
  const int64_t mla_v = int64_t(m.num_attention_heads) * m.v_head_dim;
  // Decode rows over the checkpoint's formats (MODEL.md section 7): routed experts in NVFP4, KDA
  // projections, the dense MLP and the LM head in MXFP8, MLA projections and shared experts in
  // FP8 with 128 x 128 block scales.
  const int64_t mla_qk = int64_t(m.num_attention_heads) * (m.qk_nope_head_dim + m.qk_rope_head_dim);
  const QuantizedShape quantized_shapes[] = {
      {"nvfp4.expert_up", cuda::QuantFormat::kNvfp4, m.moe_intermediate_size, d},
      {"nvfp4.expert_down", cuda::QuantFormat::kNvfp4, d, m.moe_intermediate_size},
      {"mxfp8.kda_qkv", cuda::QuantFormat::kMxfp8, kda_hk, d},
      // KDA's low-rank f_a / g_a: 8 tiles of 16 rows, k split over blocks.
      {"mxfp8.kda_f_a", cuda::QuantFormat::kMxfp8, m.kda.head_dim, d},
      {"mxfp8.dense_down", cuda::QuantFormat::kMxfp8, d, m.intermediate_size},
      {"mxfp8.lm_head", cuda::QuantFormat::kMxfp8, m.vocab_size, d},
      {"fp8_block.mla_q_a", cuda::QuantFormat::kFp8Block, m.q_lora_rank, d},
      {"fp8_block.mla_q_b", cuda::QuantFormat::kFp8Block, mla_qk, m.q_lora_rank},
      {"fp8_block.mla_o", cuda::QuantFormat::kFp8Block, d, mla_v},
  };
  for (const auto& s : quantized_shapes) run_quantized_shape(h, s);

  // Prefill rows (512-8192) of one projection per format at its production shape.
  std::vector<int> prefill(std::begin(kPrefillRows), std::end(kPrefillRows));
  if (h.quick()) prefill.pop_back();
  const QuantizedShape prefill_shapes[] = {
      {"nvfp4.expert_up", cuda::QuantFormat::kNvfp4, m.moe_intermediate_size, d},
      {"mxfp8.kda_qkv", cuda::QuantFormat::kMxfp8, kda_hk, d},
      {"fp8_block.mla_o", cuda::QuantFormat::kFp8Block, d, mla_v},
  };
  for (const auto& s : prefill_shapes) run_quantized_prefill_shape(h, s, prefill);
}

}  // namespace sparkglm::g1
