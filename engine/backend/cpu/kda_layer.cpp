#include "engine/backend/cpu/kda_layer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cpu/kda_delta_rule.h"
#include "engine/backend/cpu/linear.h"
#include "engine/backend/cpu/ops.h"
#include "engine/core/error.h"

namespace sparkglm::cpu {

namespace {

constexpr float kL2NormEps = 1e-6f;  // docs/checkpoint.md: x / sqrt(sum x^2 + 1e-6)

// Projections of every row of the batch. Each (sequence, head) task then works in place on its
// own rows and its own head's columns, so tasks never touch each other's data.
struct KdaRows {
  KdaRows(int64_t t, int64_t hk, int64_t h, int64_t rank)
      : q(size_t(t * hk)),
        k(size_t(t * hk)),
        v(size_t(t * hk)),
        low_rank(size_t(t * rank)),
        g(size_t(t * hk)),
        beta(size_t(t * h)),
        gate(size_t(t * hk)),
        o(size_t(t * hk), 0.0f) {}
  std::vector<float> q, k, v;   // [T, H*K]: projections, then conv + SiLU (+ l2norm for q, k)
  std::vector<float> low_rank;  // [T, K]: W_fa x, then W_ga x
  std::vector<float> g;         // [T, H*K]: W_fb W_fa x, then the log decay
  std::vector<float> beta;      // [T, H]: W_b x, then its sigmoid
  std::vector<float> gate;      // [T, H*V]: W_gb W_ga x (the output gate before its sigmoid)
  std::vector<float> o;         // [T, H*V]: the gated, normalised attention output
};

// Causal depthwise convolution then SiLU, in place, over n rows of x ([n, ld]) for the channels
// [c0, c0 + width). weight: [H*K, taps]; history: [taps - 1, ld_hist] (this tensor's part of the
// slot's conv history, oldest first), replaced by the last taps - 1 inputs.
void short_conv_silu(float* x, int64_t ld, int n, const float* weight, int taps, int c0, int width,
                     float* history, int64_t ld_hist) {
  const int hist = taps - 1;
  // Input p of the combined sequence [history ; rows], p in [0, hist + n).
  auto input = [&](int p) -> const float* {
    return p < hist ? history + p * ld_hist + c0 : x + (p - hist) * ld + c0;
  };
  std::vector<float> wt(size_t(taps) * width);  // [taps, width]: channels contiguous
  for (int c = 0; c < width; ++c)
    for (int j = 0; j < taps; ++j) wt[size_t(j) * width + c] = weight[(c0 + c) * taps + j];
  std::vector<float> next(size_t(hist) * width);  // [hist, width]: the new history
  for (int p = 0; p < hist; ++p) std::copy_n(input(n + p), width, &next[size_t(p) * width]);

  // Descending rows: output t reads inputs t .. t + hist of the combined sequence, i.e. rows
  // <= t, which are still raw.
  std::vector<float> acc(static_cast<size_t>(width));  // [width]
  for (int t = n - 1; t >= 0; --t) {
    const float* in0 = input(t);
    for (int c = 0; c < width; ++c) acc[c] = wt[c] * in0[c];
    for (int j = 1; j < taps; ++j) {
      const float* in = input(t + j);
      const float* wj = &wt[size_t(j) * width];
      for (int c = 0; c < width; ++c) acc[c] = acc[c] + wj[c] * in[c];
    }
    float* out = x + t * ld + c0;
    for (int c = 0; c < width; ++c) out[c] = silu(acc[c]);
  }
  for (int p = 0; p < hist; ++p)
    std::copy_n(&next[size_t(p) * width], width, history + p * ld_hist + c0);
}

// A verify slice's records (KdaStatePool state records) of one head's conv history: the history
// after row r is inputs r + 1 .. r + taps - 1 of [history ; raw rows], taken before the convolution
// overwrites the rows (r = -1: the history before row 0). x: [n, ld] raw rows; history and
// records: [taps - 1, ld_hist].
class ConvRecords {
 public:
  ConvRecords(const float* x, int64_t ld, int n, int taps, int c0, int width, const float* history,
              int64_t ld_hist)
      : hist_(taps - 1), width_(width), c0_(c0), combined_(size_t(hist_ + n) * size_t(width)) {
    for (int p = 0; p < hist_; ++p)
      std::copy_n(history + p * ld_hist + c0, width, &combined_[size_t(p) * size_t(width)]);
    for (int r = 0; r < n; ++r)
      std::copy_n(x + r * ld + c0, width, &combined_[size_t(hist_ + r) * size_t(width)]);
  }
  void write(int row, float* record, int64_t ld_hist) const {
    for (int p = 0; p < hist_; ++p)
      std::copy_n(&combined_[size_t(row + 1 + p) * size_t(width_)], width_,
                  record + p * ld_hist + c0_);
  }

 private:
  int hist_, width_, c0_;
  std::vector<float> combined_;  // [taps - 1 + n, width]
};

// Everything between the projections and W_o for one head of one sequence.
void head_forward(const ModelConfig& c, const KdaWeights& w, int kda_index,
                  const SequenceSlice& seq, int h, KdaStatePool& states, KdaRows& rows,
                  KdaPath path) {
  const int nh = c.kda.num_heads, kd = c.kda.head_dim, vd = c.kda.head_dim;
  const int taps = c.kda.short_conv_kernel_size;
  const int64_t hk = int64_t(nh) * kd;
  const int64_t r0 = seq.first_row;
  const int n = seq.num_rows;

  float* conv = states.conv(seq.state_slot, kda_index);  // [3 (q, k, v)][taps - 1][H*K]
  const int64_t conv_part = int64_t(taps - 1) * hk;
  float* q = rows.q.data() + r0 * hk;     // [n, H*K]
  float* k = rows.k.data() + r0 * hk;     // [n, H*K]
  float* v = rows.v.data() + r0 * hk;     // [n, H*V]
  std::vector<ConvRecords> conv_records;  // q, k, v; only for a recording (verify) slice
  if (seq.record_states || seq.record_before_row >= 0)
    for (int part = 0; part < 3; ++part)
      conv_records.emplace_back(part == 0   ? q
                                : part == 1 ? k
                                            : v,
                                hk, n, taps, part == 2 ? h * vd : h * kd, part == 2 ? vd : kd,
                                conv + part * conv_part, hk);
  short_conv_silu(q, hk, n, w.q_conv, taps, h * kd, kd, conv, hk);
  short_conv_silu(k, hk, n, w.k_conv, taps, h * kd, kd, conv + conv_part, hk);
  short_conv_silu(v, hk, n, w.v_conv, taps, h * vd, vd, conv + 2 * conv_part, hk);
  for (int r = 0; r < int(seq.record_states ? n : 0); ++r)
    for (int part = 0; part < 3; ++part)
      conv_records[size_t(part)].write(
          r, states.record_conv(seq.state_slot, r, kda_index) + part * conv_part, hk);
  for (int part = 0; part < 3 && seq.record_before_row >= 0; ++part)
    conv_records[size_t(part)].write(
        seq.record_before_row - 1,
        states.record_conv(seq.state_slot, 0, kda_index) + part * conv_part, hk);

  const float sqrt_k = std::sqrt(float(kd));
  for (int r = 0; r < n; ++r) {
    float* qr = q + r * hk + h * kd;
    l2_normalize(qr, kd, kL2NormEps);
    for (int i = 0; i < kd; ++i) qr[i] /= sqrt_k;
    l2_normalize(k + r * hk + h * kd, kd, kL2NormEps);
  }

  // Log decays. exp(A_log) is capped so an overflow cannot meet f + dt_bias == 0 as inf * 0.
  const float a = std::min(std::exp(w.a_log[h]), std::numeric_limits<float>::max());
  const float lower = c.kda.gate_lower_bound;
  const float* dt = w.dt_bias + h * kd;
  float* g = rows.g.data() + r0 * hk;  // [n, H*K]
  for (int r = 0; r < n; ++r) {
    float* gr = g + r * hk + h * kd;
    for (int i = 0; i < kd; ++i) gr[i] = lower * sigmoid(a * (gr[i] + dt[i]));
  }
  float* beta = rows.beta.data() + r0 * nh + h;  // [n] with stride H
  for (int r = 0; r < n; ++r) beta[r * nh] = sigmoid(beta[r * nh]);

  KdaHeadRun run;
  run.n = n;
  run.k_dim = kd;
  run.v_dim = vd;
  run.stride = hk;
  run.beta_stride = nh;
  run.q = q + h * kd;
  run.k = k + h * kd;
  run.v = v + h * vd;
  run.g = g + h * kd;
  run.beta = beta;
  run.o = rows.o.data() + r0 * hk + h * vd;
  float* state = states.state(seq.state_slot, kda_index) + int64_t(h) * kd * vd;  // [K, V]
  if (seq.record_states) {
    // Row by row, keeping the state after each: the same arithmetic as one run over n rows.
    KdaHeadRun one = run;
    one.n = 1;
    for (int r = 0; r < n; ++r) {
      kda_recurrent_run(one, state);
      std::copy_n(state, int64_t(kd) * vd,
                  states.record_state(seq.state_slot, r, kda_index) + int64_t(h) * kd * vd);
      one.q += run.stride;
      one.k += run.stride;
      one.v += run.stride;
      one.g += run.stride;
      one.o += run.stride;
      one.beta += run.beta_stride;
    }
  } else if (seq.record_before_row >= 0) {
    // Rows before it, the state into record 0, then the rest: still one token-by-token run.
    KdaHeadRun part = run;
    part.n = seq.record_before_row;
    if (part.n > 0) kda_recurrent_run(part, state);
    std::copy_n(state, int64_t(kd) * vd,
                states.record_state(seq.state_slot, 0, kda_index) + int64_t(h) * kd * vd);
    part.q += part.n * run.stride;
    part.k += part.n * run.stride;
    part.v += part.n * run.stride;
    part.g += part.n * run.stride;
    part.o += part.n * run.stride;
    part.beta += part.n * run.beta_stride;
    part.n = n - part.n;
    kda_recurrent_run(part, state);
  } else if (path == KdaPath::kRecurrent || seq.decode) {
    kda_recurrent_run(run, state);
  } else {
    kda_chunked_run(run, seq.start_position, state);
  }

  const float* gate = rows.gate.data() + r0 * hk + h * vd;  // [n, V] with stride H*V
  for (int r = 0; r < n; ++r) {
    float* orow = run.o + r * hk;
    rms_norm(orow, w.o_norm, c.rms_norm_eps, vd, orow);
    for (int j = 0; j < vd; ++j) orow[j] *= sigmoid(gate[r * hk + j]);
  }
}

}  // namespace

void kda_layer_forward(const ModelConfig& c, const KdaWeights& w, int kda_index,
                       const ForwardBatch& batch, KdaStatePool& states, const float* x, float* out,
                       ThreadPool& pool, KdaPath path) {
  const int nh = c.kda.num_heads, kd = c.kda.head_dim;
  const int64_t hk = int64_t(nh) * kd;
  const int64_t t = batch.num_rows();
  SPARKGLM_ASSERT(c.kda.short_conv_kernel_size >= 1, "KDA conv needs at least one tap");
  for (const SequenceSlice& seq : batch.seqs)
    SPARKGLM_ASSERT(seq.state_slot >= 0 && seq.state_slot < states.num_slots() &&
                        seq.first_row >= 0 && seq.first_row + seq.num_rows <= t,
                    "KDA layer: sequence slice outside the batch or the state pool");

  KdaRows rows(t, hk, nh, kd);
  linear(x, t, w.q_proj, rows.q.data(), pool);
  linear(x, t, w.k_proj, rows.k.data(), pool);
  linear(x, t, w.v_proj, rows.v.data(), pool);
  linear(x, t, w.f_a, rows.low_rank.data(), pool);
  linear(rows.low_rank.data(), t, w.f_b, rows.g.data(), pool);
  linear(x, t, w.g_a, rows.low_rank.data(), pool);
  linear(rows.low_rank.data(), t, w.g_b, rows.gate.data(), pool);
  linear(x, t, w.b_proj, rows.beta.data(), pool);

  const int64_t tasks = int64_t(batch.seqs.size()) * nh;
  pool.parallel_for(tasks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t task = lo; task < hi; ++task)
      head_forward(c, w, kda_index, batch.seqs[size_t(task / nh)], int(task % nh), states, rows,
                   path);
  });
  linear(rows.o.data(), t, w.o_proj, out, pool);
}

}  // namespace sparkglm::cpu
