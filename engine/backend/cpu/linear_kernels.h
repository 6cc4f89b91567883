#pragma once
// Register micro-kernels for cpu::linear. Every kernel keeps the contract of linear.h: an output
// element owns 8 FP32 lanes, lane l takes k = l, l+8, ... in increasing k with one fused
// multiply-add each, and the lanes are summed ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)).
//
// The unit of work is a Pair: the 8 lanes of two output elements y[2p][n] and y[2p+1][n], i.e. two
// x rows against one W row. x is packed so that a pair's chunk j is 16 contiguous floats
// [x[2p][8j..8j+8) | x[2p+1][8j..8j+8)], and a W chunk of 8 values is applied to both halves. On
// AVX-512 a Pair is one zmm (two independent 8-lane accumulators, never mixed), which doubles the
// FMA width without changing any lane's chain; on AVX2 it is two ymm.
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define SPARKGLM_LINEAR_SIMD 1
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define SPARKGLM_LINEAR_AVX512 1
#endif
#endif

namespace sparkglm::cpu::kernels {

#if defined(SPARKGLM_LINEAR_SIMD)

#define SPARKGLM_INLINE inline __attribute__((always_inline))

#if defined(SPARKGLM_LINEAR_AVX512)

struct Pair {
  __m512 v;
};
// GCC 12 reports its own unmasked AVX-512 intrinsics as "maybe uninitialized" (their unused
// pass-through operand), so the full-mask maskz forms are used; they compile to the same
// unmasked instructions.
constexpr __mmask16 kAll = 0xffff;
using WVec = __m512;  // one W chunk, the same 8 values in both halves
using TailMask = __mmask16;

SPARKGLM_INLINE Pair zero_pair() {
  return {_mm512_setzero_ps()};
}
SPARKGLM_INLINE Pair load_pair(const float* p) {
  return {_mm512_loadu_ps(p)};
}
SPARKGLM_INLINE void store_pair(float* p, Pair a) {
  _mm512_storeu_ps(p, a.v);
}
SPARKGLM_INLINE WVec load_w(const float* p) {
  return _mm512_maskz_broadcast_f32x8(kAll, _mm256_loadu_ps(p));
}
SPARKGLM_INLINE WVec widen_bf16(__m128i h) {
  // BF16 is the top half of an FP32: zero-extend each 16-bit value and shift it up, exactly.
  const __m256i both = _mm256_broadcastsi128_si256(h);
  return _mm512_castsi512_ps(
      _mm512_maskz_slli_epi32(kAll, _mm512_maskz_cvtepu16_epi32(kAll, both), 16));
}
SPARKGLM_INLINE WVec load_w(const uint16_t* p) {
  return widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// The last `tail` (< 8) values of a row; masked loads never touch memory past the row.
SPARKGLM_INLINE WVec load_w_tail(const float* p, int tail) {
  return _mm512_maskz_broadcast_f32x8(kAll, _mm256_maskz_loadu_ps(__mmask8((1u << tail) - 1), p));
}
SPARKGLM_INLINE WVec load_w_tail(const uint16_t* p, int tail) {
  return widen_bf16(_mm_maskz_loadu_epi16(__mmask8((1u << tail) - 1), p));
}
SPARKGLM_INLINE Pair fma(Pair x, WVec w, Pair acc) {
  return {_mm512_fmadd_ps(x.v, w, acc.v)};
}
SPARKGLM_INLINE TailMask tail_mask(int tail) {
  const unsigned half = (1u << tail) - 1;
  return TailMask(half | (half << 8));
}
// Lanes at or past the tail keep their value bit for bit (a zero-padded FMA would turn -0 into +0).
SPARKGLM_INLINE Pair fma_tail(Pair x, WVec w, Pair acc, TailMask m) {
  return {_mm512_mask3_fmadd_ps(x.v, w, acc.v, m)};
}
// Sums each half in the contract order: *lo from the low half (x row 2p), *hi from the high.
SPARKGLM_INLINE void reduce_pair(Pair a, float* lo, float* hi) {
  const __m512 v = a.v;
  // Per half: s = (l0+l4, l1+l5, l2+l6, l3+l7).
  const __m512 s =
      _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, _MM_SHUFFLE(3, 3, 1, 1)));
  // t = ((l0+l4)+(l2+l6), (l1+l5)+(l3+l7)).
  const __m512 t = _mm512_add_ps(s, _mm512_maskz_permute_ps(kAll, s, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 r = _mm512_add_ps(t, _mm512_maskz_permute_ps(kAll, t, _MM_SHUFFLE(2, 3, 0, 1)));
  *lo = _mm512_cvtss_f32(r);
  *hi = _mm512_cvtss_f32(_mm512_maskz_shuffle_f32x4(kAll, r, r, _MM_SHUFFLE(2, 2, 2, 2)));
}

#else  // AVX2 + FMA

struct Pair {
  __m256 lo, hi;
};
using WVec = __m256;
using TailMask = __m256;

SPARKGLM_INLINE Pair zero_pair() {
  return {_mm256_setzero_ps(), _mm256_setzero_ps()};
}
SPARKGLM_INLINE Pair load_pair(const float* p) {
  return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
}
SPARKGLM_INLINE void store_pair(float* p, Pair a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
SPARKGLM_INLINE WVec load_w(const float* p) {
  return _mm256_loadu_ps(p);
}
SPARKGLM_INLINE WVec load_w(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
template <typename T>
SPARKGLM_INLINE WVec load_w_tail(const T* p, int tail) {
  alignas(32) T buf[8] = {};
  for (int i = 0; i < tail; ++i) buf[i] = p[i];
  return load_w(buf);
}
SPARKGLM_INLINE Pair fma(Pair x, WVec w, Pair acc) {
  return {_mm256_fmadd_ps(x.lo, w, acc.lo), _mm256_fmadd_ps(x.hi, w, acc.hi)};
}
SPARKGLM_INLINE TailMask tail_mask(int tail) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(tail), lane));
}
SPARKGLM_INLINE Pair fma_tail(Pair x, WVec w, Pair acc, TailMask m) {
  return {_mm256_blendv_ps(acc.lo, _mm256_fmadd_ps(x.lo, w, acc.lo), m),
          _mm256_blendv_ps(acc.hi, _mm256_fmadd_ps(x.hi, w, acc.hi), m)};
}
SPARKGLM_INLINE float reduce8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
SPARKGLM_INLINE void reduce_pair(Pair a, float* lo, float* hi) {
  *lo = reduce8(a.lo);
  *hi = reduce8(a.hi);
}

#endif

// Writes one W chunk as 8 FP32 values (the packed path's conversion, done once per block).
SPARKGLM_INLINE void widen_chunk(float* dst, const float* src) {
  _mm256_storeu_ps(dst, _mm256_loadu_ps(src));
}
SPARKGLM_INLINE void widen_chunk(float* dst, const uint16_t* src) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  _mm256_storeu_ps(dst, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
}

// Register tiles. A tile is MP pairs (2*MP x rows) by NR W rows: MP*NR Pair accumulators plus MP x
// registers and a W register must fit the register file without spills (32 zmm on AVX-512, 16 ymm
// on AVX2, where a Pair takes two), so the tile is as wide as that allows: each x load then feeds
// NR FMAs and each W load MP FMAs, which keeps the FMA pipes, not the load ports, the limit.
#if defined(SPARKGLM_LINEAR_AVX512)
constexpr int kMaxPairs = 4;
// 4 x 5 = 20 accumulators; wider tiles measured no faster and leave no room for the loads.
constexpr int kPackedRows = 5;
// Streaming (decode): fewer pairs leave room for more W rows, i.e. more independent FMA chains and
// more concurrent memory streams per thread.
constexpr int stream_rows(int pairs) {
  return pairs <= 2 ? 8 : pairs == 3 ? 6 : 5;
}
// Packing W pays on AVX-512 for batches whose x outgrows L2 (see linear.cpp).
constexpr bool kPackedPathPays = true;
#else
constexpr int kMaxPairs = 2;
constexpr int kPackedRows = 3;
constexpr int stream_rows(int pairs) {
  return pairs <= 1 ? 6 : 3;
}
// With 16 registers GCC reloads x for every FMA of the packed tile and the path is load bound: on
// this Zen 5 built without AVX-512, 8192 x 4096, M = 256 ran at 62 GFLOP/s packed vs 97 streamed
// (71% of one core's 256-bit peak), so AVX2 machines always stream.
constexpr bool kPackedPathPays = false;
#endif

// W rows as the kernel sees them: row r's chunk j (8 values), and its partial last chunk.
template <typename T, int NR>
struct StreamRows {  // rows read straight from the checkpoint (no copy)
  const T* row[NR];
  SPARKGLM_INLINE WVec load(int r, int64_t j) const { return load_w(row[r] + 8 * j); }
  SPARKGLM_INLINE WVec load_tail(int r, int64_t j, int tail) const {
    return load_w_tail(row[r] + 8 * j, tail);
  }
  // The rows of a panel are separate streams that each cross a 4 KB page every few microseconds,
  // where the hardware prefetchers stop; asking for each row's line 96 chunks ahead (1.5 KB of
  // BF16) measured +20% streaming rate on one core (64 and 128 chunks: within noise of it).
  static constexpr int64_t kPrefetchChunks = 96;
  SPARKGLM_INLINE void prefetch(int r, int64_t j) const {
    // Integer arithmetic: the address may lie past the end of W (a prefetch never faults).
    const uintptr_t ahead =
        reinterpret_cast<uintptr_t>(row[r] + 8 * j) + 8 * kPrefetchChunks * sizeof(T);
    _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
  }
};
template <int NR>
struct PackedRows {  // FP32 panel laid out [chunk][NR][8], zero padded
  const float* panel;
  SPARKGLM_INLINE WVec load(int r, int64_t j) const { return load_w(panel + (j * NR + r) * 8); }
  SPARKGLM_INLINE WVec load_tail(int r, int64_t j, int) const { return load(r, j); }
  SPARKGLM_INLINE void prefetch(int, int64_t) const {}
};

// One chunk j: every pair meets every row, one FMA each.
template <int MP, int NR, typename Rows>
SPARKGLM_INLINE void step(const float* xp, int64_t pair_stride, const Rows& w, int64_t j,
                          Pair (&acc)[MP][NR]) {
  Pair x[MP];
#pragma GCC unroll 8
  for (int p = 0; p < MP; ++p) x[p] = load_pair(xp + p * pair_stride + 16 * j);
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    const WVec wv = w.load(r, j);
#pragma GCC unroll 8
    for (int p = 0; p < MP; ++p) acc[p][r] = fma(x[p], wv, acc[p][r]);
  }
}

// acc [MP][NR]: acc[p][r] continues its lanes over chunks [j0, j0 + n_full) and, when tail > 0,
// over the partial chunk j0 + n_full (lanes < tail only). xp [MP][chunks][16]: pair p's chunk j at
// xp + p * pair_stride + 16 * j. w: NR rows of chunks, see StreamRows and PackedRows.
template <int MP, int NR, typename Rows>
SPARKGLM_INLINE void tile(const float* xp, int64_t pair_stride, const Rows& w, int64_t j0,
                          int64_t n_full, int tail, Pair (&acc)[MP][NR]) {
  const int64_t j1 = j0 + n_full;
  int64_t j = j0;
  // Four chunks per iteration: a BF16 row's 64-byte line, so a streamed row is prefetched once
  // per line.
  for (; j + 4 <= j1; j += 4) {
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) w.prefetch(r, j);
    step<MP, NR>(xp, pair_stride, w, j, acc);
    step<MP, NR>(xp, pair_stride, w, j + 1, acc);
    step<MP, NR>(xp, pair_stride, w, j + 2, acc);
    step<MP, NR>(xp, pair_stride, w, j + 3, acc);
  }
  for (; j < j1; ++j) step<MP, NR>(xp, pair_stride, w, j, acc);
  if (tail > 0) {
    const TailMask m = tail_mask(tail);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const WVec wv = w.load_tail(r, j1, tail);
#pragma GCC unroll 8
      for (int p = 0; p < MP; ++p)
        acc[p][r] = fma_tail(load_pair(xp + p * pair_stride + 16 * j1), wv, acc[p][r], m);
    }
  }
}

#endif  // SPARKGLM_LINEAR_SIMD

}  // namespace sparkglm::cpu::kernels
