#include "engine/backend/cpu/linear.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <new>

#include "engine/backend/cpu/linear_kernels.h"

namespace sparkglm::cpu {

namespace {

// Grow-only, 64-byte aligned scratch, one per thread and role, so steady-state calls never
// allocate and a 64-byte Pair load never straddles two cache lines.
class Scratch {
 public:
  ~Scratch() { std::free(data_); }
  // At least n floats; the contents are not kept across a regrowth.
  float* get(size_t n) {
    if (n > size_) {
      std::free(data_);
      size_ = (n + 15) / 16 * 16;
      data_ = static_cast<float*>(std::aligned_alloc(64, size_ * sizeof(float)));
      if (!data_) throw std::bad_alloc();
    }
    return data_;
  }
  // Gives back a buffer grown past `limit` floats (one huge prefill should not pin its size).
  void trim(size_t limit) {
    if (size_ > limit) {
      std::free(data_);
      data_ = nullptr;
      size_ = 0;
    }
  }

 private:
  float* data_ = nullptr;
  size_t size_ = 0;
};

inline float reduce_lanes(const float* l) {
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// The contract written out one element at a time: the fallback on machines without AVX2 + FMA.
template <typename T>
float dot_lanes(const float* x, const T* w, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < n; ++k) {
    float wk;
    if constexpr (sizeof(T) == 2) {
      wk = bf16_to_f32(w[k]);
    } else {
      wk = w[k];
    }
    acc[k & 7] = std::fma(x[k], wk, acc[k & 7]);
  }
  return reduce_lanes(acc);
}

// One call's shapes. Rows n are relative to the slice: W row n0 + n, output column n.
struct Problem {
  int64_t m;
  const void* w;  // [n1 - n0, k]: W row n0 of the slice, BF16 or F32
  int64_t k;
  float* y;  // [m, ldy]
  int64_t ldy;
  int64_t full;         // complete 8-wide chunks per row: k / 8
  int tail;             // k % 8: elements in the last, partial chunk
  int64_t pairs;        // ceil(m / 2)
  const float* xp;      // packed x: [pairs][chunks][16], see pack_x
  int64_t pair_stride;  // floats between pairs: 16 * chunks
  int64_t chunks() const { return full + (tail > 0); }
  void put(int64_t row, int64_t n, float v) const {
    if (row < m) y[row * ldy + n] = v;
  }
};

#if defined(SPARKGLM_LINEAR_SIMD)
using kernels::Pair;

// x [m, ldx] -> xp [ceil(m/2)][chunks][16]: rows 2p and 2p+1 interleaved by chunk, zero padded past
// k and past the last row, so the kernels read a pair's chunk with one aligned load.
void pack_x(const float* x, int64_t ldx, int64_t m, int64_t k, int64_t chunks, float* xp) {
  const int64_t pairs = (m + 1) / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    for (int h = 0; h < 2; ++h) {
      const int64_t row = 2 * p + h;
      float* dst = xp + p * chunks * 16 + int64_t(8) * h;
      const float* src = row < m ? x + row * ldx : x;  // the padding row reads nothing
      for (int64_t j = 0; j < chunks; ++j) {
        const int64_t k0 = 8 * j, n = row < m ? std::min<int64_t>(8, k - k0) : 0;
        for (int64_t i = 0; i < n; ++i) dst[16 * j + i] = src[k0 + i];
        for (int64_t i = n; i < 8; ++i) dst[16 * j + i] = 0.0f;
      }
    }
  }
}

// acc [MP][NR] finished lanes -> y[2 * (p0 + p) + {0, 1}][n + r], rows past n_end or m dropped.
template <int MP, int NR>
void store_tile(const Problem& pr, int64_t p0, int64_t n, int64_t n_end, Pair (&acc)[MP][NR]) {
  for (int r = 0; r < NR; ++r) {
    if (n + r >= n_end) break;
    for (int p = 0; p < MP; ++p) {
      float lo, hi;
      kernels::reduce_pair(acc[p][r], &lo, &hi);
      pr.put(2 * (p0 + p), n + r, lo);
      pr.put(2 * (p0 + p) + 1, n + r, hi);
    }
  }
}

// Calls f.template operator()<MP>() for the runtime mp in [1, kMaxPairs], so that every tile
// height has a fully unrolled kernel.
template <typename F>
void with_pairs(int64_t mp, F&& f) {
  static_assert(kernels::kMaxPairs <= 4);
  switch (mp) {
    case 1:
      f.template operator()<1>();
      break;
    case 2:
      if constexpr (kernels::kMaxPairs >= 2) f.template operator()<2>();
      break;
    case 3:
      if constexpr (kernels::kMaxPairs >= 3) f.template operator()<3>();
      break;
    default:
      if constexpr (kernels::kMaxPairs >= 4) f.template operator()<4>();
      break;
  }
}

// ---- Decode: W streamed once from memory, every x row applied to it while it is in registers.
// Past the last row, a panel repeats its last row: the loads stay in bounds and the extra results
// are dropped, so no remainder kernels are needed.
template <typename T, int NR>
void stream_range(const Problem& pr, int64_t lo, int64_t hi) {
  const T* w = static_cast<const T*>(pr.w);
  for (int64_t n = lo; n < hi; n += NR) {
    kernels::StreamRows<T, NR> rows;
    for (int r = 0; r < NR; ++r) rows.row[r] = w + std::min(n + r, hi - 1) * pr.k;
    // With more than kMaxPairs pairs the panel (NR rows, a few tens of KB) is reread from cache.
    for (int64_t p0 = 0; p0 < pr.pairs; p0 += kernels::kMaxPairs) {
      with_pairs(std::min<int64_t>(kernels::kMaxPairs, pr.pairs - p0), [&]<int MP>() {
        Pair acc[MP][NR];
        for (auto& a : acc)
          for (auto& b : a) b = kernels::zero_pair();
        kernels::tile<MP, NR>(pr.xp + p0 * pr.pair_stride, pr.pair_stride, rows, 0, pr.full,
                              pr.tail, acc);
        store_tile<MP, NR>(pr, p0, n, hi, acc);
      });
    }
  }
}

// ---- Prefill: compute bound, so W is blocked for reuse across many x rows.
//
// A block of kNB W rows is converted once to FP32 panels for all of K (kNB x K x 4 B, 1.3 MB at
// K = 4096) and then every x row runs over it, so each W byte is fetched and converted once per
// call and each x byte fetched from L3 feeds kNB / 2 = 40 FLOP. K is walked in slices of kKC
// chunks: a tile's x slice (4 pairs x 512 k x 8 B = 16 KB) stays in L1 while it meets each panel
// of the block in turn, the panels of one slice (kNB x 512 x 4 B = 160 KB) stay in L2. Lane
// accumulators that must outlive a slice are parked in `lanes` (exactly the FP32 values the
// registers held, so the chains continue unchanged); kMBP bounds that buffer (8 tiles x 16
// panels x 20 x 64 B = 160 KB, L2). Measured on one core (CPU time, 8192 x 4096, M = 256): 40-row
// blocks or 16-pair blocks lose 2-5%, 32-wide K slices 15%; 1024-wide slices no better.
constexpr int kNR = kernels::kPackedRows;
constexpr int64_t kNB = int64_t(16) * kNR;  // W rows per block
constexpr int64_t kMBP = 32;                // x pairs per block (64 rows)
constexpr int64_t kKC = 64;                 // chunks per K slice (512 k)

thread_local Scratch t_panels, t_lanes;

// Chunk j of panel row (pn, r) goes to slice s = j / kKC as [s][panel][chunk in slice][kNR][8]:
// a tile walks the panels of one slice in order, so its W reads are one sequential stream. Unused
// where the packed path does not pay (kernels::kPackedPathPays false): clang would warn.
[[maybe_unused]] inline int64_t panel_offset(int64_t chunks, int64_t n_panels, int64_t pn,
                                             int64_t j) {
  const int64_t s = j / kKC, nj = std::min(kKC, chunks - s * kKC);
  return (s * kKC * n_panels + pn * nj + (j - s * kKC)) * kNR * 8;
}

// w rows [n, n + rows) of [*, k] -> out [slices][panels][chunks in slice][kNR][8], FP32.
template <typename T>
void pack_panels(const T* w, int64_t k, int64_t n, int64_t rows, float* out) {
  const int64_t full = k / 8, chunks = (k + 7) / 8, n_panels = (rows + kNR - 1) / kNR;
  for (int64_t pn = 0; pn < n_panels; ++pn) {
    for (int r = 0; r < kNR; ++r) {
      const int64_t row = pn * kNR + r;
      const T* src = row < rows ? w + (n + row) * k : w;  // padding rows read nothing
      for (int64_t j0 = 0; j0 < chunks; j0 += kKC) {
        const int64_t j1 = std::min(chunks, j0 + kKC);
        float* dst = out + panel_offset(chunks, n_panels, pn, j0) - j0 * kNR * 8 + int64_t(r) * 8;
        for (int64_t j = j0; j < j1; ++j) {
          float* d = dst + j * kNR * 8;
          if (row < rows && j < full) {
            kernels::widen_chunk(d, src + 8 * j);
            continue;
          }
          // A partial panel's missing rows and the zero padding past k: computed, never stored.
          for (int64_t i = 0; i < 8; ++i) {
            float v = 0.0f;
            if (row < rows && 8 * j + i < k) {
              if constexpr (sizeof(T) == 2) {
                v = bf16_to_f32(src[8 * j + i]);
              } else {
                v = src[8 * j + i];
              }
            }
            d[i] = v;
          }
        }
      }
    }
  }
}

template <typename T>
void packed_range(const Problem& pr, int64_t lo, int64_t hi) {
  constexpr int MPmax = kernels::kMaxPairs;
  constexpr int64_t kPanels = kNB / kNR;
  const T* w = static_cast<const T*>(pr.w);
  const int64_t chunks = pr.chunks();
  float* panels = t_panels.get(size_t(std::max<int64_t>(1, kNB * chunks * 8)));
  float* lanes = t_lanes.get(size_t((kMBP + MPmax - 1) / MPmax * kPanels * MPmax * kNR * 16));
  for (int64_t nb = lo; nb < hi; nb += kNB) {
    const int64_t rows = std::min(kNB, hi - nb);
    const int64_t n_panels = (rows + kNR - 1) / kNR;
    pack_panels(w, pr.k, nb, rows, panels);
    for (int64_t pb = 0; pb < pr.pairs; pb += kMBP) {
      const int64_t npairs = std::min(kMBP, pr.pairs - pb);
      for (int64_t j0 = 0; j0 < std::max<int64_t>(chunks, 1); j0 += kKC) {
        const int64_t nj = std::min(kKC, chunks - j0);
        const bool first = j0 == 0, last = j0 + kKC >= chunks;
        const int tail = last ? pr.tail : 0;
        const int64_t n_full = nj - (tail > 0);
        for (int64_t t = 0; t * MPmax < npairs; ++t) {
          const int64_t p0 = pb + t * MPmax;
          with_pairs(std::min<int64_t>(MPmax, npairs - t * MPmax), [&]<int MP>() {
            for (int64_t pn = 0; pn < n_panels; ++pn) {
              float* park = lanes + (t * kPanels + pn) * int64_t(MPmax * kNR * 16);
              Pair acc[MP][kNR];
              for (int p = 0; p < MP; ++p)
                for (int r = 0; r < kNR; ++r)
                  acc[p][r] = first ? kernels::zero_pair()
                                    : kernels::load_pair(park + int64_t(p * kNR + r) * 16);
              const kernels::PackedRows<kNR> wr{panels + panel_offset(chunks, n_panels, pn, j0)};
              kernels::tile<MP, kNR>(pr.xp + p0 * pr.pair_stride + 16 * j0, pr.pair_stride, wr, 0,
                                     n_full, tail, acc);
              if (last) {
                store_tile<MP, kNR>(pr, p0, nb + pn * kNR, hi, acc);
              } else {
                for (int p = 0; p < MP; ++p)
                  for (int r = 0; r < kNR; ++r)
                    kernels::store_pair(park + int64_t(p * kNR + r) * 16, acc[p][r]);
              }
            }
          });
        }
      }
    }
  }
}

// Which path: streaming rereads a W panel from cache for every 8 x rows and rereads all of x for
// every panel, which costs nothing while x stays in L2 (1 MB per Zen 5 core); beyond that the
// packed path wins (one core, CPU time, 8192 x 4096: M = 64 streams at 220 vs 204 GFLOP/s packed,
// M = 256 at 201 vs 222; 4096 x 8192, M = 256: 179 vs 218). Packing never pays below 16 rows.
constexpr int64_t kStreamMaxRows = 16;
constexpr int64_t kStreamMaxXBytes = int64_t(1) << 20;

template <typename T>
void run_range(const Problem& pr, int64_t lo, int64_t hi) {
  if constexpr (kernels::kPackedPathPays) {
    const int64_t x_bytes = pr.pairs * pr.pair_stride * int64_t(sizeof(float));
    if (pr.m > kStreamMaxRows && x_bytes > kStreamMaxXBytes) return packed_range<T>(pr, lo, hi);
  }
  using kernels::stream_rows;
  switch (std::min<int64_t>(pr.pairs, kernels::kMaxPairs)) {
    case 1:
      return stream_range<T, stream_rows(1)>(pr, lo, hi);
    case 2:
      return stream_range<T, stream_rows(2)>(pr, lo, hi);
    case 3:
      return stream_range<T, stream_rows(3)>(pr, lo, hi);
    default:
      return stream_range<T, stream_rows(4)>(pr, lo, hi);
  }
}

thread_local Scratch t_xpack;
#endif  // SPARKGLM_LINEAR_SIMD

// Ranges smaller than this many multiply-adds per thread are not worth a parallel dispatch.
constexpr int64_t kMinMacsPerThread = int64_t(1) << 17;

}  // namespace

float dot(const float* a, const float* b, int64_t n) {
#if defined(SPARKGLM_LINEAR_SIMD)
  // One ymm holds the 8 lanes; the partial last chunk updates only its own lanes.
  const int64_t full = n / 8;
  const int tail = int(n % 8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < full; ++j)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + 8 * j), _mm256_loadu_ps(b + 8 * j), acc);
  float l[8];
  _mm256_storeu_ps(l, acc);
  for (int i = 0; i < tail; ++i) l[i] = std::fma(a[8 * full + i], b[8 * full + i], l[i]);
  return reduce_lanes(l);
#else
  return dot_lanes(a, b, n);
#endif
}

void linear_slice(const float* x, int64_t ldx, int64_t m, const Linear& w, int64_t n0, int64_t n1,
                  float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t n = n1 - n0, k = w.cols;
  if (m <= 0 || n <= 0) return;
  assert(w.dtype == DType::kBF16 || w.dtype == DType::kF32);
  assert(n0 >= 0 && n1 <= w.rows && ldx >= k && ldy >= n);
  const bool bf16 = w.dtype == DType::kBF16;
  const int64_t grain =
      std::max<int64_t>(1, kMinMacsPerThread / std::max<int64_t>(1, std::max<int64_t>(m, 8) * k));
#if defined(SPARKGLM_LINEAR_SIMD)
  Problem pr;
  pr.m = m;
  pr.w = bf16 ? static_cast<const void*>(w.bf16() + n0 * k)
              : static_cast<const void*>(w.f32() + n0 * k);
  pr.k = k;
  pr.y = y;
  pr.ldy = ldy;
  pr.full = k / 8;
  pr.tail = int(k % 8);
  pr.pairs = (m + 1) / 2;
  pr.pair_stride = 16 * pr.chunks();
  float* xp = t_xpack.get(size_t(std::max<int64_t>(1, pr.pairs * pr.pair_stride)));
  pack_x(x, ldx, m, k, pr.chunks(), xp);
  pr.xp = xp;
  const Problem* prp = &pr;
  if (bf16) {
    pool.parallel_for(n, grain,
                      [prp](int64_t lo, int64_t hi) { run_range<uint16_t>(*prp, lo, hi); });
  } else {
    pool.parallel_for(n, grain, [prp](int64_t lo, int64_t hi) { run_range<float>(*prp, lo, hi); });
  }
  t_xpack.trim(size_t(16) << 20);
#else
  pool.parallel_for(n, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      for (int64_t i = 0; i < m; ++i) {
        y[i * ldy + r] = bf16 ? dot_lanes(x + i * ldx, w.bf16() + (n0 + r) * k, k)
                              : dot_lanes(x + i * ldx, w.f32() + (n0 + r) * k, k);
      }
    }
  });
#endif
}

void linear(const float* x, int64_t ldx, int64_t m, const Linear& w, float* y, int64_t ldy,
            ThreadPool& pool) {
  linear_slice(x, ldx, m, w, 0, w.rows, y, ldy, pool);
}

}  // namespace sparkglm::cpu
