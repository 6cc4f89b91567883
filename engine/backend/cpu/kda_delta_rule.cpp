#include "engine/backend/cpu/kda_delta_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sparkglm::cpu {

namespace {

// Exponent reference blocks of the chunked form. Within 16 positions a log decay sum moves by at
// most 16 * 5 = 80 (half that from a block's middle), so e^{+-difference} stays inside FP32's
// range, whereas e^{-G} over a whole chunk (G down to 64 * -5 = -320) would overflow.
constexpr int kSubChunk = 16;

// y[j] += a * x[j], j < n.
inline void axpy(float a, const float* x, float* y, int n) {
  for (int j = 0; j < n; ++j) y[j] = std::fma(a, x[j], y[j]);
}

// c[m][n] += sum_p a[m][p] b[p][n] (-= with kSubtract) over one kM x kN block, p < depth, the
// block held in registers (the unroll pragmas make GCC keep it there).
template <int kM, int kN, bool kSubtract>
inline void gemm_block(int depth, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc) {
  float acc[kM][kN];  // [kM, kN]: the c block
  for (int mm = 0; mm < kM; ++mm)
    for (int nn = 0; nn < kN; ++nn) acc[mm][nn] = c[mm * ldc + nn];
  for (int p = 0; p < depth; ++p) {
    const float* bp = b + p * ldb;
#pragma GCC unroll 8
    for (int mm = 0; mm < kM; ++mm) {
      const float am = kSubtract ? -a[mm * lda + p] : a[mm * lda + p];
#pragma GCC unroll 32
      for (int nn = 0; nn < kN; ++nn) acc[mm][nn] = std::fma(am, bp[nn], acc[mm][nn]);
    }
  }
  for (int mm = 0; mm < kM; ++mm)
    for (int nn = 0; nn < kN; ++nn) c[mm * ldc + nn] = acc[mm][nn];
}

// c[m][n] += sum_p a[m][p] b[p][n] (-= with kSubtract) for m < rows, n < cols, p < depth; with
// `lower`, a is zero above its diagonal and those terms are skipped blockwise. Each c element
// accumulates its terms in increasing p with FMA whatever the blocking, so no element depends on
// the shape of the product it sits in.
template <bool kSubtract = false>
void gemm_acc(int rows, int cols, int depth, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc, bool lower = false) {
  constexpr int kM = 8;
  for (int m0 = 0; m0 < rows; m0 += kM) {
    const int mb = std::min(kM, rows - m0);
    const int p_end = lower ? std::min(depth, m0 + mb) : depth;
    const float* am = a + m0 * lda;
    float* cm = c + m0 * ldc;
    int n0 = 0;
    if (mb == kM) {
      for (; n0 + 32 <= cols; n0 += 32)
        gemm_block<kM, 32, kSubtract>(p_end, am, lda, b + n0, ldb, cm + n0, ldc);
      for (; n0 + 16 <= cols; n0 += 16)
        gemm_block<kM, 16, kSubtract>(p_end, am, lda, b + n0, ldb, cm + n0, ldc);
    }
    // Edge rows and columns: the same order, accumulated in memory.
    for (int mm = 0; mm < mb; ++mm)
      for (int p = 0; p < p_end; ++p) {
        const float x = kSubtract ? -am[mm * lda + p] : am[mm * lda + p];
        for (int n = n0; n < cols; ++n)
          cm[mm * ldc + n] = std::fma(x, b[p * ldb + n], cm[mm * ldc + n]);
      }
  }
}

// Working set of one chunk (C <= kKdaChunk positions), allocated once per head run. Matrices
// with C columns use the stride kKdaChunk.
struct ChunkScratch {
  ChunkScratch(int k, int v)
      : gam(size_t(kKdaChunk) * k),
        kg(size_t(kKdaChunk) * k),
        qg(size_t(kKdaChunk) * k),
        w(size_t(kKdaChunk) * v),
        left_k(size_t(kSubChunk) * k),
        left_q(size_t(kSubChunk) * k),
        right_t(size_t(k) * kKdaChunk),
        a(size_t(kKdaChunk) * kKdaChunk),
        b(size_t(kKdaChunk) * kKdaChunk),
        u(size_t(kKdaChunk) * v),
        kend(size_t(k) * kKdaChunk) {}
  std::vector<double> gam;     // [C, K]: G_t, inclusive cumulative log decay from the chunk start
  std::vector<float> kg, qg;   // [C, K]: e^{G_t} * k_t, e^{G_t} * q_t
  std::vector<float> w;        // [C, V]: S0^T kg_t
  std::vector<float> left_k;   // [kSubChunk, K]: k_t * e^{G_t - G_ref} for t in one sub-chunk
  std::vector<float> left_q;   // [kSubChunk, K]: q_t * e^{G_t - G_ref}
  std::vector<float> right_t;  // [K, C]: column s is beta_s k_s * e^{G_ref - G_s}
  std::vector<float> a;        // [C, C]: beta_s ((e^{G_t - G_s} * k_s) . k_t) for s < t, else 0
  std::vector<float> b;        // [C, C]: beta_s ((e^{G_t - G_s} * k_s) . q_t) for s <= t, else 0
  std::vector<float> u;        // [C, V]: the values the delta rule writes
  std::vector<float> kend;     // [K, C]: beta_s k_s[i] e^{G_C[i] - G_s[i]}, row i feeds S[i]
};

constexpr int64_t kLd = kKdaChunk;  // row stride of the [., C] matrices

// The rows of one chunk: positions [r0, r0 + c) of the run.
class ChunkRows {
 public:
  ChunkRows(const KdaHeadRun& run, int r0) : run_(run), r0_(r0) {}
  const float* q(int t) const { return run_.q + (r0_ + t) * run_.stride; }
  const float* k(int t) const { return run_.k + (r0_ + t) * run_.stride; }
  const float* v(int t) const { return run_.v + (r0_ + t) * run_.stride; }
  const float* g(int t) const { return run_.g + (r0_ + t) * run_.stride; }
  float* o(int t) const { return run_.o + (r0_ + t) * run_.stride; }
  float beta(int t) const { return run_.beta[(r0_ + t) * run_.beta_stride]; }

 private:
  const KdaHeadRun& run_;
  int64_t r0_;
};

// left_k/left_q rows for t in [t0, t0 + nt): factor e^{G_t - G_ref}.
void set_left(const ChunkRows& rows, ChunkScratch& sc, int kd, int t0, int nt, int ref) {
  const double* gref = &sc.gam[size_t(ref) * kd];
  for (int t = 0; t < nt; ++t) {
    const double* gt = &sc.gam[size_t(t0 + t) * kd];
    const float* kt = rows.k(t0 + t);
    const float* qt = rows.q(t0 + t);
    for (int i = 0; i < kd; ++i) {
      const float e = std::exp(float(gt[i] - gref[i]));
      sc.left_k[size_t(t) * kd + i] = kt[i] * e;
      sc.left_q[size_t(t) * kd + i] = qt[i] * e;
    }
  }
}

// right_t columns s in [s0, s0 + ns): beta_s k_s e^{G_ref - G_s}.
void set_right(const ChunkRows& rows, ChunkScratch& sc, int kd, int s0, int ns, int ref) {
  const double* gref = &sc.gam[size_t(ref) * kd];
  for (int s = s0; s < s0 + ns; ++s) {
    const double* gs = &sc.gam[size_t(s) * kd];
    const float* ks = rows.k(s);
    const float bs = rows.beta(s);
    for (int i = 0; i < kd; ++i)
      sc.right_t[size_t(i) * kLd + s] = bs * ks[i] * std::exp(float(gref[i] - gs[i]));
  }
}

// Rows [t0, t0 + nt) x columns [s0, s0 + ns) of a and b from the current left and right factors.
void gram_block(ChunkScratch& sc, int kd, int t0, int nt, int s0, int ns) {
  gemm_acc(nt, ns, kd, sc.left_k.data(), kd, &sc.right_t[size_t(s0)], kLd,
           &sc.a[size_t(t0) * kLd + s0], kLd);
  gemm_acc(nt, ns, kd, sc.left_q.data(), kd, &sc.right_t[size_t(s0)], kLd,
           &sc.b[size_t(t0) * kLd + s0], kLd);
}

// One chunk of c positions starting at row r0; state: [K, V] in/out.
void chunk_step(const KdaHeadRun& run, int r0, int c, float* state, ChunkScratch& sc) {
  const int kd = run.k_dim, vd = run.v_dim;
  const ChunkRows rows(run, r0);

  // Cumulative log decays in FP64, so that differences of sums near -320 keep FP32 precision.
  for (int t = 0; t < c; ++t) {
    const float* gt = rows.g(t);
    double* gam = &sc.gam[size_t(t) * kd];
    for (int i = 0; i < kd; ++i) gam[i] = (t > 0 ? gam[i - kd] : 0.0) + double(gt[i]);
  }
  // Keys and queries decayed to the chunk start; e^{G_t} <= 1 may underflow to 0, as the true
  // factor rounds.
  for (int t = 0; t < c; ++t) {
    const float* kt = rows.k(t);
    const float* qt = rows.q(t);
    for (int i = 0; i < kd; ++i) {
      const float e = std::exp(float(sc.gam[size_t(t) * kd + i]));
      sc.kg[size_t(t) * kd + i] = kt[i] * e;
      sc.qg[size_t(t) * kd + i] = qt[i] * e;
    }
  }
  // w_t = S0^T kg_t; o_t starts as S0^T qg_t.
  std::fill_n(sc.w.begin(), size_t(c) * vd, 0.0f);
  for (int t = 0; t < c; ++t) std::fill_n(rows.o(t), vd, 0.0f);
  gemm_acc(c, vd, kd, sc.kg.data(), kd, state, vd, sc.w.data(), vd);
  gemm_acc(c, vd, kd, sc.qg.data(), kd, state, vd, rows.o(0), run.stride);

  // Gram matrices, one sub-chunk of rows t at a time.
  std::fill_n(sc.a.begin(), size_t(c) * kLd, 0.0f);
  std::fill_n(sc.b.begin(), size_t(c) * kLd, 0.0f);
  for (int t0 = 0; t0 < c; t0 += kSubChunk) {
    const int nt = std::min(kSubChunk, c - t0);
    // Within the sub-chunk: reference in its middle bounds both factors by e^{40}.
    const int mid = t0 + nt / 2;
    set_left(rows, sc, kd, t0, nt, mid);
    set_right(rows, sc, kd, t0, nt, mid);
    gram_block(sc, kd, t0, nt, t0, nt);
    for (int t = t0; t < t0 + nt; ++t) {  // keep s < t in a, s <= t in b
      std::fill(&sc.a[size_t(t) * kLd + t], &sc.a[size_t(t) * kLd + t0 + nt], 0.0f);
      std::fill(&sc.b[size_t(t) * kLd + t + 1], &sc.b[size_t(t) * kLd + t0 + nt], 0.0f);
    }
    if (t0 > 0) {
      // Earlier sub-chunks: reference at the last position before this one, so both factors
      // are <= 1 and the left one >= e^{-80}, a normal FP32 number.
      set_left(rows, sc, kd, t0, nt, t0 - 1);
      set_right(rows, sc, kd, 0, t0, t0 - 1);
      gram_block(sc, kd, t0, nt, 0, t0);
    }
  }

  // u = (I + a)^{-1} (v - w) by forward substitution, one sub-chunk of rows at a time: first
  // the earlier sub-chunks' terms as one product, then the rows inside in order.
  for (int t0 = 0; t0 < c; t0 += kSubChunk) {
    const int nt = std::min(kSubChunk, c - t0);
    for (int t = t0; t < t0 + nt; ++t) {
      const float* vt = rows.v(t);
      const float* wt = &sc.w[size_t(t) * vd];
      float* ut = &sc.u[size_t(t) * vd];
      for (int j = 0; j < vd; ++j) ut[j] = vt[j] - wt[j];
    }
    gemm_acc<true>(nt, vd, t0, &sc.a[size_t(t0) * kLd], kLd, sc.u.data(), vd,
                   &sc.u[size_t(t0) * vd], vd);
    for (int t = t0 + 1; t < t0 + nt; ++t)
      for (int s = t0; s < t; ++s)
        axpy(-sc.a[size_t(t) * kLd + s], &sc.u[size_t(s) * vd], &sc.u[size_t(t) * vd], vd);
  }
  // o_t += sum_{s <= t} b[t][s] u_s.
  gemm_acc(c, vd, c, sc.b.data(), kLd, sc.u.data(), vd, rows.o(0), run.stride, true);

  // End state: S = diag(e^{G_C}) S0 + sum_s diag(e^{G_C - G_s}) beta_s k_s u_s^T.
  const double* gend = &sc.gam[size_t(c - 1) * kd];
  for (int s = 0; s < c; ++s) {
    const double* gs = &sc.gam[size_t(s) * kd];
    const float* ks = rows.k(s);
    const float bs = rows.beta(s);
    for (int i = 0; i < kd; ++i)
      sc.kend[size_t(i) * kLd + s] = bs * ks[i] * std::exp(float(gend[i] - gs[i]));
  }
  for (int i = 0; i < kd; ++i) {
    float* srow = state + size_t(i) * vd;
    const float e = std::exp(float(gend[i]));
    for (int j = 0; j < vd; ++j) srow[j] *= e;
  }
  gemm_acc(kd, vd, c, sc.kend.data(), kLd, sc.u.data(), vd, state, vd);
}

}  // namespace

void kda_recurrent_run(const KdaHeadRun& run, float* state) {
  const int kd = run.k_dim, vd = run.v_dim;
  std::vector<float> decay(static_cast<size_t>(kd));  // [K]: e^{g}
  std::vector<float> kv(static_cast<size_t>(vd));     // [V]: (diag(e^g) S)^T k
  std::vector<float> d(static_cast<size_t>(vd));  // [V]: beta (v - kv), the delta written along k
  for (int r = 0; r < run.n; ++r) {
    const float* q = run.q + r * run.stride;
    const float* k = run.k + r * run.stride;
    const float* v = run.v + r * run.stride;
    const float* g = run.g + r * run.stride;
    float* o = run.o + r * run.stride;
    const float beta = run.beta[r * run.beta_stride];
    for (int i = 0; i < kd; ++i) decay[i] = std::exp(g[i]);
    // Decay and read in one pass over the state.
    std::fill(kv.begin(), kv.end(), 0.0f);
    for (int i = 0; i < kd; ++i) {
      float* srow = state + size_t(i) * vd;
      for (int j = 0; j < vd; ++j) srow[j] *= decay[i];
      axpy(k[i], srow, kv.data(), vd);
    }
    for (int j = 0; j < vd; ++j) d[j] = beta * (v[j] - kv[j]);
    // Write and query in a second pass.
    std::fill_n(o, vd, 0.0f);
    for (int i = 0; i < kd; ++i) {
      float* srow = state + size_t(i) * vd;
      axpy(k[i], d.data(), srow, vd);
      axpy(q[i], srow, o, vd);
    }
  }
}

void kda_chunked_run(const KdaHeadRun& run, int64_t start_position, float* state) {
  ChunkScratch scratch(run.k_dim, run.v_dim);
  for (int r = 0; r < run.n;) {
    const int64_t position = start_position + r;
    const int c = int(std::min<int64_t>(run.n - r, kKdaChunk - position % kKdaChunk));
    chunk_step(run, r, c, state, scratch);
    r += c;
  }
}

}  // namespace sparkglm::cpu
