// G1 rows for KDA: short conv + gates (kda_prepare with the history advance), the gated delta rule
// (decode: B sequences x 1 row; prefill: 1 sequence x n rows, token by token and chunked) and the
// gated output norm. References: the formulas of cpu::kda_layer (conv, SiLU, l2norm, gates),
// cpu::kda_recurrent_run for the token-by-token kernel and cpu::kda_chunked_run for the chunked
// one.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "bench/cuda/g1_harness.h"
#include "engine/backend/cpu/kda_delta_rule.h"
#include "engine/backend/cpu/ops.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/kda.h"
#include "engine/backend/cuda/kda_chunked.h"

namespace sparkglm::g1 {

namespace {

constexpr int kK = cuda::kKdaHeadDim, kTaps = cuda::kKdaTaps, kHist = kTaps - 1;

std::string batch_shape(int seqs, int n, int heads) {
  return std::to_string(seqs) + " seq x " + std::to_string(n) + " rows, H " +
         std::to_string(heads) + ", K=V " + std::to_string(kK);
}

void run_prepare(Harness& h, int seqs, int n, bool decode) {
  const int heads = h.model().kda.num_heads;
  const int64_t hk = int64_t(heads) * kK;
  const float lower = h.model().kda.gate_lower_bound;
  const int64_t rows = int64_t(seqs) * n;
  const auto raw_q = host_uniform("kda.raw_q", rows * hk, 0.0f, 1.0f);
  const auto raw_k = host_uniform("kda.raw_k", rows * hk, 0.0f, 1.0f);
  const auto raw_v = host_uniform("kda.raw_v", rows * hk, 0.0f, 1.0f);
  const auto f = host_uniform("kda.f", rows * hk, 0.0f, 2.0f);
  const auto b_logit = host_uniform("kda.b", rows * heads, 0.0f, 3.0f);
  const auto conv_w = host_uniform("kda.conv_w", 3 * hk * kTaps, 0.0f, 0.8f);
  const auto hist = host_uniform("kda.hist", int64_t(seqs) * 3 * kHist * hk, 0.0f, 1.0f);
  const auto a_log = host_uniform("kda.a_log", heads, 1.4f, 1.3f);
  const auto dt_bias = host_uniform("kda.dt_bias", hk, 0.0f, 1.0f);
  auto d_raw_q = upload(raw_q), d_raw_k = upload(raw_k), d_raw_v = upload(raw_v), d_f = upload(f);
  auto d_b = upload(b_logit), d_conv = upload(conv_w), d_hist0 = upload(hist),
       d_hist = upload(hist);
  auto d_alog = upload(a_log), d_dt = upload(dt_bias);
  auto d_q = device_alloc(size_t(rows * hk * 4)), d_k = device_alloc(size_t(rows * hk * 4));
  auto d_v = device_alloc(size_t(rows * hk * 4)), d_decay = device_alloc(size_t(rows * hk * 4));
  auto d_beta = device_alloc(size_t(rows * heads * 4));

  // CPU reference, per (sequence, head), as cpu::kda_layer's head_forward computes it.
  std::vector<float> q(size_t(rows * hk)), k(q.size()), v(q.size()), decay(q.size());
  std::vector<float> beta(size_t(rows * heads)), hist_out(hist);
  h.pool().parallel_for(int64_t(seqs) * heads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t s = task / heads, head = task % heads;
      const std::vector<float>* raws[3] = {&raw_q, &raw_k, &raw_v};
      std::vector<float>* outs[3] = {&q, &k, &v};
      for (int part = 0; part < 3; ++part) {
        const float* hs = &hist[size_t((s * 3 + part) * kHist * hk)];
        auto input = [&](int p, int64_t c) {
          return p < kHist ? hs[p * hk + c] : (*raws[part])[size_t((s * n + p - kHist) * hk + c)];
        };
        for (int t = 0; t < n; ++t)
          for (int i = 0; i < kK; ++i) {
            const int64_t c = head * kK + i;
            const float* w = &conv_w[size_t((part * hk + c) * kTaps)];
            float acc = w[0] * input(t, c);
            for (int j = 1; j < kTaps; ++j) acc = acc + w[j] * input(t + j, c);
            (*outs[part])[size_t((s * n + t) * hk + c)] = cpu::silu(acc);
          }
        float* ho = &hist_out[size_t((s * 3 + part) * kHist * hk)];
        for (int p = 0; p < kHist; ++p)
          for (int i = 0; i < kK; ++i) ho[p * hk + head * kK + i] = input(n + p, head * kK + i);
      }
      const float a = std::min(std::exp(a_log[size_t(head)]), 3.4e38f);
      for (int t = 0; t < n; ++t) {
        const int64_t at = (s * n + t) * hk + head * kK;
        cpu::l2_normalize(&q[size_t(at)], kK, 1e-6f);
        for (int i = 0; i < kK; ++i) q[size_t(at + i)] /= std::sqrt(float(kK));
        cpu::l2_normalize(&k[size_t(at)], kK, 1e-6f);
        for (int i = 0; i < kK; ++i)
          decay[size_t(at + i)] = std::exp(
              lower * cpu::sigmoid(a * (f[size_t(at + i)] + dt_bias[size_t(head * kK + i)])));
        beta[size_t((s * n + t) * heads + head)] =
            cpu::sigmoid(b_logit[size_t((s * n + t) * heads + head)]);
      }
    }
  });

  OperatorCase c;
  c.op = "kda.conv_gates";
  c.shape = batch_shape(seqs, n, heads);
  c.rows = rows;
  c.decode = decode;
  c.tolerance = 1e-10;
  c.bytes = double(rows * hk * 4 * 8 + int64_t(seqs) * 3 * kHist * hk * 4 * 2);
  c.flops = double(rows * hk) * 40.0;
  c.flops_on_tensor_cores = false;
  c.note =
      "conv4 + SiLU + l2norm + gates + beta, then the conv history advance; why under the "
      "floor: two launches over at most a few MB, latency at decode rows";
  const cuda::KdaBatch batch{seqs, n, heads};
  cuda::KdaPrepareArgs args{ptr<float>(d_raw_q), ptr<float>(d_raw_k),
                            ptr<float>(d_raw_v), ptr<float>(d_f),
                            ptr<float>(d_b),     ptr<float>(d_conv),
                            ptr<float>(d_hist),  ptr<float>(d_alog),
                            ptr<float>(d_dt),    lower,
                            ptr<float>(d_q),     ptr<float>(d_k),
                            ptr<float>(d_v),     ptr<float>(d_decay),
                            ptr<float>(d_beta)};
  float* hist_dev = ptr<float>(d_hist);
  const float* hist0_dev = ptr<float>(d_hist0);
  const size_t hist_bytes = hist.size() * 4;
  c.reset = [=](cudaStream_t st) {
    SPARKGLM_CUDA_CHECK(
        cudaMemcpyAsync(hist_dev, hist0_dev, hist_bytes, cudaMemcpyDeviceToDevice, st));
  };
  c.launch = [=](cudaStream_t st) {
    cuda::kda_prepare(batch, args, st);
    cuda::kda_advance_conv_history(batch, args.raw_q, args.raw_k, args.raw_v, hist_dev, st);
  };
  c.outputs.push_back({"q", args.q, rows * hk, false, hk, q, {}});
  c.outputs.push_back({"k", args.k, rows * hk, false, hk, k, {}});
  c.outputs.push_back({"v", args.v, rows * hk, false, hk, v, {}});
  c.outputs.push_back({"decay", args.decay, rows * hk, false, hk, decay, {}});
  c.outputs.push_back({"beta", args.beta, rows * heads, false, heads, beta, {}});
  c.outputs.push_back(
      {"conv_history", hist_dev, int64_t(hist.size()), false, 3 * kHist * hk, hist_out, {}});
  c.keep = {d_raw_q, d_raw_k, d_raw_v, d_f, d_b, d_conv,  d_hist0, d_hist,
            d_alog,  d_dt,    d_q,     d_k, d_v, d_decay, d_beta};
  h.run(c);
}

// chunked: kda_chunked_prefill with row 0 at absolute position `start`, against the CPU's chunked
// form; else kda_recurrent against the CPU's token-by-token form.
void run_recurrent(Harness& h, int seqs, int n, bool decode, bool chunked = false,
                   int64_t start = 0) {
  const int heads = h.model().kda.num_heads;
  const int64_t hk = int64_t(heads) * kK;
  const float lower = h.model().kda.gate_lower_bound;
  const int64_t rows = int64_t(seqs) * n;
  auto q = host_uniform("kda.q", rows * hk, 0.0f, 1.0f);
  auto k = host_uniform("kda.k", rows * hk, 0.0f, 1.0f);
  const auto v = host_uniform("kda.v", rows * hk, 0.0f, 1.0f);
  const auto z = host_uniform("kda.gz", rows * hk, -3.0f, 5.0f);
  const auto beta = host_uniform("kda.beta", rows * heads, 0.5f, 0.5f);
  const auto state0 = host_uniform("kda.state", int64_t(seqs) * heads * kK * kK, 0.0f, 0.1f);
  std::vector<float> g(z.size()), decay(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    g[i] = lower * cpu::sigmoid(z[i]);  // (-5, 0), mostly slow decays like a trained gate
    decay[i] = std::exp(g[i]);          // the same std::exp cpu::kda_recurrent_run applies
  }
  for (int64_t r = 0; r < rows * heads; ++r) {
    cpu::l2_normalize(&q[size_t(r * kK)], kK, 1e-6f);
    for (int i = 0; i < kK; ++i) q[size_t(r * kK + i)] /= std::sqrt(float(kK));
    cpu::l2_normalize(&k[size_t(r * kK)], kK, 1e-6f);
  }
  auto d_q = upload(q), d_k = upload(k), d_v = upload(v), d_decay = upload(decay);
  auto d_beta = upload(beta), d_state0 = upload(state0), d_state = upload(state0);
  auto d_o = device_alloc(size_t(rows * hk * 4));

  std::vector<float> o(size_t(rows * hk)), state(state0);
  h.pool().parallel_for(int64_t(seqs) * heads, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task) {
      const int64_t s = task / heads, head = task % heads;
      cpu::KdaHeadRun run;
      run.n = n;
      run.k_dim = kK;
      run.v_dim = kK;
      run.stride = hk;
      run.beta_stride = heads;
      const int64_t at = s * n * hk + head * kK;
      run.q = &q[size_t(at)];
      run.k = &k[size_t(at)];
      run.v = &v[size_t(at)];
      run.g = &g[size_t(at)];
      run.beta = &beta[size_t(s * n * heads + head)];
      run.o = &o[size_t(at)];
      float* st = &state[size_t((s * heads + head) * kK * kK)];
      if (chunked)
        cpu::kda_chunked_run(run, start, st);
      else
        cpu::kda_recurrent_run(run, st);
    }
  });

  OperatorCase c;
  c.op = decode ? "kda.recurrent_decode" : chunked ? "kda.prefill_chunked" : "kda.prefill";
  c.shape = batch_shape(seqs, n, heads) + (start ? ", from position " + std::to_string(start) : "");
  c.rows = rows;
  c.decode = decode;
  // FP32 throughout; over thousands of steps the state's rounding differences grow slowly.
  // Chunked: every product takes TF32 inputs (10 mantissa bits), about 2e-7 on random data.
  c.tolerance = decode ? 1e-10 : chunked ? 1e-5 : 1e-8;
  const double state_bytes = double(seqs) * heads * kK * kK * 4;
  c.bytes = 2 * state_bytes + double(rows) * hk * 4 * 5 + double(rows) * heads * 4;
  c.flops = double(rows) * heads * kK * kK * 7.0;  // decay multiply + 3 FMAs per state element
  c.flops_on_tensor_cores = false;
  c.note = decode ? "token-by-token recurrence, state in registers; why under the floor: the "
                    "state (64 KB a head) is read and written once a row, at 1-32 rows a few "
                    "microseconds of latency"
                  : "token-by-token recurrence (one-row prefill calls; longer ones take the "
                    "chunked kernel below); floor counts the recurrence on FP32 cores";
  const cuda::KdaBatch batch{seqs, n, heads};
  if (chunked) {
    // Per chunk of C rows: Grams and T products ~4 C^2 K, the scan 6 C K V + C^2 V: 8.5 K V a row.
    c.flops = double(rows) * heads * kK * kK * 8.5;
    c.flops_on_tensor_cores = true;
    c.note =
        "fused chunked form (the engine's prefill): a block per (head, 64 value "
        "columns) walks the 64-position chunks with its state in registers, Gram matrices and "
        "state products as TF32 mma (half the BF16 peak the floor uses), FP32 forward "
        "substitution; why slower than fla-core's chunk_kda: two blocks per head repeat the "
        "Gram work, only 128 blocks run (one per SM) and a block's chunks are serial";
  }
  const float *qp = ptr<float>(d_q), *kp = ptr<float>(d_k), *vp = ptr<float>(d_v);
  const float *dp = ptr<float>(d_decay), *bp = ptr<float>(d_beta), *s0 = ptr<float>(d_state0);
  float *sp = ptr<float>(d_state), *op = ptr<float>(d_o);
  const size_t sbytes = state0.size() * 4;
  c.reset = [=](cudaStream_t st) {
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(sp, s0, sbytes, cudaMemcpyDeviceToDevice, st));
  };
  if (chunked)
    c.launch = [=](cudaStream_t st) {
      cuda::kda_chunked_prefill(batch, start, qp, kp, vp, dp, bp, sp, op, st);
    };
  else
    c.launch = [=](cudaStream_t st) { cuda::kda_recurrent(batch, qp, kp, vp, dp, bp, sp, op, st); };
  c.outputs.push_back({"o", op, rows * hk, false, hk, o, {}});
  c.outputs.push_back(
      {"state", sp, int64_t(state.size()), false, int64_t(heads) * kK * kK, state, {}});
  c.keep = {d_q, d_k, d_v, d_decay, d_beta, d_state0, d_state, d_o};
  h.run(c);
}

void run_output_gate(Harness& h, int64_t rows, bool decode) {
  const int heads = h.model().kda.num_heads;
  const int64_t hk = int64_t(heads) * kK;
  const auto o = host_uniform("kda.o", rows * hk, 0.0f, 1.0f);
  const auto gate = host_uniform("kda.gate", rows * hk, 0.0f, 3.0f);
  const auto norm = host_uniform("kda.o_norm", kK, 1.0f, 0.5f);
  auto d_o = upload(o), d_gate = upload(gate), d_norm = upload(norm);
  auto d_out = device_alloc(size_t(rows * hk * 4));
  std::vector<float> ref(o.size());
  for (int64_t r = 0; r < rows * heads; ++r) {
    cpu::rms_norm(&o[size_t(r * kK)], norm.data(), 1e-5f, kK, &ref[size_t(r * kK)]);
    for (int i = 0; i < kK; ++i) ref[size_t(r * kK + i)] *= cpu::sigmoid(gate[size_t(r * kK + i)]);
  }
  OperatorCase c;
  c.op = "kda.output_gate";
  c.shape = "o[" + std::to_string(rows) + "," + std::to_string(heads) + "x" + std::to_string(kK) +
            "] f32";
  c.rows = rows;
  c.decode = decode;
  c.tolerance = 1e-10;
  c.bytes = double(rows * hk * 12);
  c.flops = double(rows * hk) * 8;
  c.flops_on_tensor_cores = false;
  c.note = "why under the floor at decode rows: 32 KB a row, one launch's latency";
  const cuda::KdaBatch batch{int(rows), 1, heads};
  const float *op = ptr<float>(d_o), *gp = ptr<float>(d_gate), *np = ptr<float>(d_norm);
  float* outp = ptr<float>(d_out);
  c.launch = [=](cudaStream_t st) {
    cuda::kda_output_gate(batch, op, gp, np, 1e-5f, outp, nullptr, st);
  };
  c.outputs.push_back({"out", outp, rows * hk, false, hk, ref, {}});
  c.keep = {d_o, d_gate, d_norm, d_out};
  h.run(c);
}

}  // namespace

void run_kda_cases(Harness& h) {
  for (int r : kDecodeRows) run_prepare(h, r, 1, true);
  for (int r : kPrefillRows)
    if (!(h.quick() && r == 8192)) run_prepare(h, 1, r, false);
  for (int r : kDecodeRows) run_recurrent(h, r, 1, true);
  for (int r : kPrefillRows)
    if (!(h.quick() && r == 8192)) run_recurrent(h, 1, r, false);
  // Boundary: a chunk that is not a multiple of 64 positions.
  run_recurrent(h, 1, 77, false);
  // The chunked form at the same rows, then odd lengths from positions inside a chunk.
  for (int r : kPrefillRows)
    if (!(h.quick() && r == 8192)) run_recurrent(h, 1, r, false, true);
  run_recurrent(h, 1, 77, false, true);
  run_recurrent(h, 1, 77, false, true, 37);
  run_recurrent(h, 1, 2048, false, true, 37);
  for (int r : kDecodeRows) run_output_gate(h, r, true);
  for (int r : kPrefillRows)
    if (!(h.quick() && r == 8192)) run_output_gate(h, r, false);
}

}  // namespace sparkglm::g1
