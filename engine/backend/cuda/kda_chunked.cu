#include "engine/backend/cuda/kda_chunked.h"

#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kC = kKdaChunkLen;  // positions per chunk
constexpr int kK = kKdaHeadDim;   // K = V
constexpr int kSub = 16;          // exponent reference blocks, as on the CPU

__host__ __device__ inline int first_chunk_len(int64_t start, int n) {
  const int f = int(kC - start % kC);
  return f < n ? f : n;
}
__host__ __device__ inline int chunk_count(int64_t start, int n) {
  return 1 + (n - first_chunk_len(start, n) + kC - 1) / kC;
}

struct ChunkArgs {
  KdaBatch batch;
  int64_t start;
  int chunks;  // per sequence
  const float* q;
  const float* k;
  const float* v;
  const float* decay;
  const float* beta;
  float* state;
  float* o;
};

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void prefetch_l2(const float* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
// Fragment element e of an m16n8 accumulator is row (lane >> 2) + 8 * (e >> 1), column
// 2 * (lane & 3) + (e & 1).
__device__ __forceinline__ int frag_row(int e) {
  return ((threadIdx.x & 31) >> 2) + 8 * (e >> 1);
}
__device__ __forceinline__ int frag_col(int e) {
  return 2 * (threadIdx.x & 3) + (e & 1);
}

// The prefill: one block per (sequence, head, 64 value columns), no workspace.
//
// Each block walks the chunks of its (sequence, head) in order with S[:, its 64 columns] in
// registers (master, FP32) and a TF32-rounded copy in shared memory for the products. Per chunk:
//   1. k, q, decay, v (its columns), beta into shared memory (k and q were requested during the
//      previous chunk's step 6; cp.async).
//   2. G = cumulative log decay (FP64 sums over 4 segments of 16 rows, stored FP32).
//   3. Gram matrices A (beta_s (e^{G_t-G_s} k_s).k_t, s < t) and B (with q_t, s <= t) as ten 16x16
//      blocks, the exponential factors formed while loading the mma fragments, with the CPU's
//      references (a sub-chunk's middle on the diagonal, the position before it elsewhere).
//   4. In place: k -> e^G k, q -> e^G q, decay -> beta k e^{G_C - G} (all rounded to TF32).
//   5. X = v - (e^G k) S and O = (e^G q) S (O stays in registers).
//   6. u = (I + A)^{-1} X by forward substitution on FP32 CUDA cores (no explicit inverse).
//   7. o = O + B u; S = diag(e^{G_C}) S + (beta k e^{G_C - G})^T u.
// The two blocks of a head repeat steps 2-4 (cheaper than exchanging them). Products are TF32
// mma with FP32 accumulation; the substitution is FP32.

constexpr int kVB = 64;    // value columns per block
constexpr int kLdK = 132;  // rows of K floats: A fragments conflict-free (132 % 32 == 4)
constexpr int kLdC = 68;   // rows of C floats
constexpr int kLdV = 72;   // rows of kVB floats: B fragments conflict-free (72 % 32 == 8)
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct Layout {
  static constexpr int kKb = 0;                  // [C, ldK]: k, then e^G k
  static constexpr int kQb = kKb + kC * kLdK;    // [C, ldK]: q, then e^G q
  static constexpr int kGb = kQb + kC * kLdK;    // [C, ldK]: decay, G, then beta k e^{G_C-G}
  static constexpr int kVb = kGb + kC * kLdK;    // [C, ldV]: v, then X, then u
  static constexpr int kSb = kVb + kC * kLdV;    // [K, ldV]: S rounded to TF32
  static constexpr int kAb = kSb + kK * kLdV;    // [C, ldC]: A (FP32); FP64 scratch in step 2
  static constexpr int kBb = kAb + kC * kLdC;    // [C, ldC]: B (TF32)
  static constexpr int kBeta = kBb + kC * kLdC;  // [C]
  static constexpr int kGEnd = kBeta + kC;       // [K]: G_C
  static constexpr int kFloats = kGEnd + kK;
  static constexpr int kBytes = kFloats * 4;
};
static_assert(Layout::kBytes <= 227 * 1024, "the H100/H200 opt-in limit per block");
static_assert(Layout::kQb % 4 == 0 && Layout::kGb % 4 == 0 && Layout::kVb % 4 == 0 &&
                  Layout::kAb % 2 == 0 && 4 * kK * 8 <= kC * kLdC * 4,
              "cp.async needs 16-byte rows; the FP64 scratch must fit in A");
static_assert(kWarps * 16 == kK && kWarps * 8 == kVB && (kC / 16) * (kVB / 32) == kWarps,
              "the warp tilings below assume 8 warps");

__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(uint32_t(__cvta_generic_to_shared(dst))),
      "l"(src));
}
__device__ __forceinline__ float round_tf32(float x) {
  return __uint_as_float(to_tf32(x));
}
__device__ __forceinline__ uint32_t bits(float x) {
  return __float_as_uint(x);
}

// c += A B for one m16n8k8 tile; a: the A fragment (rows g, g + 8; depth t, t + 4), b0/b1: B at
// depth t / t + 4, column g (g = lane / 4, t = lane % 4). Inputs already TF32.
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Rows [0, len) of a [rows, cols] slab (global row stride gld) into shared rows of stride sld by
// cp.async; rows from len on are set to `fill`.
__device__ __forceinline__ void load_rows(float* dst, int sld, const float* src, int64_t gld,
                                          int len, int cols, float fill) {
  const int c4 = cols / 4;
  for (int x = threadIdx.x; x < kC * c4; x += kThreads) {
    const int t = x / c4, c = (x % c4) * 4;
    if (t < len)
      cp_async16(dst + t * sld + c, src + t * gld + c);
    else
      *reinterpret_cast<float4*>(dst + t * sld + c) = make_float4(fill, fill, fill, fill);
  }
}

// Gram task (ten 16x16 blocks of the lower triangle): rows 16 j, columns 16 sb.
__device__ __forceinline__ void gram_task(int task, int& j, int& sb) {
  if (task < 4) {
    j = sb = task;
    return;
  }
  const int o = task - 4;  // (1,0) (2,0) (2,1) (3,0) (3,1) (3,2)
  j = o < 1 ? 1 : o < 3 ? 2 : 3;
  sb = o - (j == 1 ? 0 : j == 2 ? 1 : 3);
}

// Grid: (V / kVB, H, B); block: 8 warps.
__global__ void __launch_bounds__(kThreads, 1) chunked_kernel(const __grid_constant__ ChunkArgs p) {
  extern __shared__ float4 sm4[];
  float* sm = reinterpret_cast<float*>(sm4);
  float* Kb = sm + Layout::kKb;
  float* Qb = sm + Layout::kQb;
  float* Gb = sm + Layout::kGb;
  float* Vb = sm + Layout::kVb;
  float* Sb = sm + Layout::kSb;
  float* Ab = sm + Layout::kAb;
  float* Bb = sm + Layout::kBb;
  float* beta_s = sm + Layout::kBeta;
  float* gend = sm + Layout::kGEnd;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int vb = blockIdx.x, h = blockIdx.y, seq = blockIdx.z;
  const int heads = p.batch.heads, n = p.batch.rows_per_seq;
  const int64_t hk = int64_t(heads) * kK;
  const int64_t slot = p.batch.slots ? int64_t(p.batch.slots[seq]) : int64_t(seq);
  float* state = p.state + (slot * heads + h) * kK * kK + vb * kVB;
  // Input element (t, i) of the chunk starting at row r0: base(r0) + t * hk + i.
  auto base = [&](int r0) { return (int64_t(seq) * n + r0) * hk + int64_t(h) * kK; };

  // S rows 16 warp + g (+ 8), columns 8 nt + 2 tq (+ 1): the S update's accumulator tiles.
  float s[kVB / 8][4];
#pragma unroll
  for (int nt = 0; nt < kVB / 8; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = 16 * warp + g + 8 * hf, c = 8 * nt + 2 * tq;
      const float2 v2 = *reinterpret_cast<const float2*>(state + int64_t(i) * kK + c);
      s[nt][2 * hf] = v2.x, s[nt][2 * hf + 1] = v2.y;
      Sb[i * kLdV + c] = round_tf32(v2.x), Sb[i * kLdV + c + 1] = round_tf32(v2.y);
    }

  int r0 = 0, len = first_chunk_len(p.start, n);
  load_rows(Kb, kLdK, p.k + base(r0), hk, len, kK, 0.0f);
  load_rows(Qb, kLdK, p.q + base(r0), hk, len, kK, 0.0f);
  for (int ci = 0; ci < p.chunks; ++ci) {
    // 1. The rest of this chunk's inputs (k and q are on their way).
    const int64_t b0 = base(r0);
    load_rows(Gb, kLdK, p.decay + b0, hk, len, kK, 1.0f);
    load_rows(Vb, kLdV, p.v + b0 + vb * kVB, hk, len, kVB, 0.0f);
    asm volatile("cp.async.commit_group;");
    if (tid < kC)
      beta_s[tid] = tid < len ? p.beta[(int64_t(seq) * n + r0 + tid) * heads + h] : 0.0f;
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();

    // 2. G: column tid % K, segments tid / K and tid / K + 2 of 16 rows; FP64 so that G near
    // -320 keeps its small steps. Rows from len on repeat G_{len-1}.
    {
      double* part = reinterpret_cast<double*>(Ab);  // [4][K] segment sums
      const int col = tid % kK;
      for (int seg = tid / kK; seg < 4; seg += 2) {
        double acc = 0.0;
        for (int tt = 0; tt < 16; ++tt) {
          const int t = seg * 16 + tt;
          const float lg = t < len ? logf(Gb[t * kLdK + col]) : 0.0f;
          Gb[t * kLdK + col] = lg;
          acc += double(lg);
        }
        part[seg * kK + col] = acc;
      }
      __syncthreads();
      for (int seg = tid / kK; seg < 4; seg += 2) {
        double acc = 0.0;
        for (int sg = 0; sg < seg; ++sg) acc += part[sg * kK + col];
        for (int tt = 0; tt < 16; ++tt) {
          const int t = seg * 16 + tt;
          acc += double(Gb[t * kLdK + col]);
          Gb[t * kLdK + col] = float(acc);
        }
      }
      __syncthreads();
      if (tid < kK) gend[tid] = Gb[(len - 1) * kLdK + tid];
    }

    // 3. Gram blocks; warp w takes tasks w and w + 8.
    for (int task = warp; task < 10; task += kWarps) {
      int j, sb;
      gram_task(task, j, sb);
      const int t0 = 16 * j, s0 = 16 * sb;
      const bool diag = j == sb;
      float ca[2][4] = {}, cb[2][4] = {};
      if (t0 < len) {
        const int ref = diag ? t0 + min(kSub, len - t0) / 2 : t0 - 1;
        const float* gref = Gb + ref * kLdK;
        const int ta = t0 + g, tb = t0 + g + 8;
        float bs[2];
        int sc[2];
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          sc[nt] = s0 + 8 * nt + g;
          bs[nt] = sc[nt] < len ? beta_s[sc[nt]] : 0.0f;
        }
#pragma unroll 2
        for (int x0 = 0; x0 < kK; x0 += 8) {
          const int i0 = x0 + tq, i1 = x0 + tq + 4;
          const float gr0 = gref[i0], gr1 = gref[i1];
          uint32_t ak[4], aq[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int t = (e & 1) ? tb : ta, i = e < 2 ? i0 : i1;
            const float f = __expf(Gb[t * kLdK + i] - (e < 2 ? gr0 : gr1));
            const bool live = t < len;
            ak[e] = to_tf32(live ? Kb[t * kLdK + i] * f : 0.0f);
            aq[e] = to_tf32(live ? Qb[t * kLdK + i] * f : 0.0f);
          }
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            const int sr = sc[nt];
            const bool live = sr < len;
            const float r0v =
                live ? bs[nt] * Kb[sr * kLdK + i0] * __expf(gr0 - Gb[sr * kLdK + i0]) : 0.0f;
            const float r1v =
                live ? bs[nt] * Kb[sr * kLdK + i1] * __expf(gr1 - Gb[sr * kLdK + i1]) : 0.0f;
            const uint32_t rb0 = to_tf32(r0v), rb1 = to_tf32(r1v);
            mma_tf32(ca[nt], ak, rb0, rb1);
            mma_tf32(cb[nt], aq, rb0, rb1);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int tr = t0 + frag_row(e), scol = s0 + 8 * nt + frag_col(e);
          Ab[tr * kLdC + scol] = (!diag || scol < tr) ? ca[nt][e] : 0.0f;
          Bb[tr * kLdC + scol] = round_tf32((!diag || scol <= tr) ? cb[nt][e] : 0.0f);
        }
    }
    __syncthreads();

    // 4. Decayed keys and queries, end-of-chunk key factors; rows from len on are zero.
    for (int x = tid; x < kC * kK; x += kThreads) {
      const int t = x / kK, i = x % kK, at = t * kLdK + i;
      const bool live = t < len;
      const float gt = Gb[at], kk = Kb[at];
      Kb[at] = live ? round_tf32(kk * __expf(gt)) : 0.0f;
      Qb[at] = live ? round_tf32(Qb[at] * __expf(gt)) : 0.0f;
      Gb[at] = live ? round_tf32(beta_s[t] * kk * __expf(gend[i] - gt)) : 0.0f;
    }
    __syncthreads();

    // 5. X = v - (e^G k) S into Vb, O = (e^G q) S in registers; warp: rows 16 mt, columns
    // 32 nh .. 32 nh + 31.
    const int mt = warp & 3, nh = warp >> 2;
    float co[4][4] = {};
    {
      float cx[4][4] = {};
      const float* kg = Kb + 16 * mt * kLdK;
      const float* qg = Qb + 16 * mt * kLdK;
#pragma unroll 4
      for (int x0 = 0; x0 < kK; x0 += 8) {
        uint32_t ak[4], aq[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int at = (g + 8 * (e & 1)) * kLdK + x0 + tq + 4 * (e >> 1);
          ak[e] = bits(kg[at]);
          aq[e] = bits(qg[at]);
        }
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const int col = 32 * nh + 8 * nt + g;
          const uint32_t sb0 = bits(Sb[(x0 + tq) * kLdV + col]);
          const uint32_t sb1 = bits(Sb[(x0 + tq + 4) * kLdV + col]);
          mma_tf32(cx[nt], ak, sb0, sb1);
          mma_tf32(co[nt], aq, sb0, sb1);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float& x = Vb[(16 * mt + frag_row(e)) * kLdV + 32 * nh + 8 * nt + frag_col(e)];
          x = x - cx[nt][e];
        }
    }
    __syncthreads();

    // The next chunk's k and q into the buffers step 5 has finished with; its decay and v
    // towards L2.
    const int next_r0 = r0 + len, next_len = min(kC, n - next_r0);
    if (ci + 1 < p.chunks) {
      const int64_t nb = base(next_r0);
      load_rows(Kb, kLdK, p.k + nb, hk, next_len, kK, 0.0f);
      load_rows(Qb, kLdK, p.q + nb, hk, next_len, kK, 0.0f);
      asm volatile("cp.async.commit_group;");
      for (int x = tid; x < kC * 6; x += kThreads) {  // 4 lines of decay, 2 of v per row
        const int t = x / 6, part = x % 6;
        if (t < next_len) {
          const float* line = part < 4 ? p.decay + nb + t * hk + part * 32
                                       : p.v + nb + t * hk + vb * kVB + (part - 4) * 32;
          prefetch_l2(line);
        }
      }
    }

    // 6. u = (I + A)^{-1} X, column by column: warp w owns columns 8w .. 8w + 7, lane 4 c + r
    // holds rows r, r + 4, ... of column 8w + c. Row s is final once rows < s are applied, and
    // its owner hands it to the column's other lanes.
    {
      const int r = lane & 3, col = 8 * warp + (lane >> 2);
      float x[kC / 4];
#pragma unroll
      for (int m = 0; m < kC / 4; ++m) x[m] = Vb[(r + 4 * m) * kLdV + col];
#pragma unroll
      for (int sr = 0; sr < kC - 1; ++sr) {
        const float us = __shfl_sync(0xffffffffu, x[sr >> 2], (lane & ~3) | (sr & 3));
#pragma unroll
        for (int m = sr >> 2; m < kC / 4; ++m) {
          const int t = r + 4 * m;
          if (t > sr) x[m] = fmaf(-Ab[t * kLdC + sr], us, x[m]);
        }
      }
#pragma unroll
      for (int m = 0; m < kC / 4; ++m) Vb[(r + 4 * m) * kLdV + col] = x[m];
    }
    __syncthreads();

    // 7a. o = O + B u (B lower triangular with its diagonal), rows below len.
    {
      for (int x0 = 0; x0 < 16 * (mt + 1); x0 += 8) {
        uint32_t a[4];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          a[e] = bits(Bb[(16 * mt + g + 8 * (e & 1)) * kLdC + x0 + tq + 4 * (e >> 1)]);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const int col = 32 * nh + 8 * nt + g;
          mma_tf32(co[nt], a, to_tf32(Vb[(x0 + tq) * kLdV + col]),
                   to_tf32(Vb[(x0 + tq + 4) * kLdV + col]));
        }
      }
      float* o = p.o + b0 + vb * kVB;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int t = 16 * mt + g + 8 * hf;
          if (t < len)
            *reinterpret_cast<float2*>(o + t * hk + 32 * nh + 8 * nt + 2 * tq) =
                make_float2(co[nt][2 * hf], co[nt][2 * hf + 1]);
        }
    }
    // 7b. S = diag(e^{G_C}) S + (beta k e^{G_C - G})^T u; warp w: S rows 16 w .. 16 w + 15.
    {
      const float e0 = expf(gend[16 * warp + g]), e1 = expf(gend[16 * warp + g + 8]);
#pragma unroll
      for (int nt = 0; nt < kVB / 8; ++nt)
        s[nt][0] *= e0, s[nt][1] *= e0, s[nt][2] *= e1, s[nt][3] *= e1;
      const float* ke = Gb + 16 * warp;  // A(i, t) = ke[t * ldK + i]
#pragma unroll 2
      for (int x0 = 0; x0 < kC; x0 += 8) {
        uint32_t a[4];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          a[e] = bits(ke[(x0 + tq + 4 * (e >> 1)) * kLdK + g + 8 * (e & 1)]);
#pragma unroll
        for (int nt = 0; nt < kVB / 8; ++nt)
          mma_tf32(s[nt], a, to_tf32(Vb[(x0 + tq) * kLdV + 8 * nt + g]),
                   to_tf32(Vb[(x0 + tq + 4) * kLdV + 8 * nt + g]));
      }
#pragma unroll
      for (int nt = 0; nt < kVB / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          Sb[(16 * warp + frag_row(e)) * kLdV + 8 * nt + frag_col(e)] = round_tf32(s[nt][e]);
    }
    __syncthreads();
    r0 = next_r0, len = next_len;
  }

#pragma unroll
  for (int nt = 0; nt < kVB / 8; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = 16 * warp + g + 8 * hf;
      *reinterpret_cast<float2*>(state + int64_t(i) * kK + 8 * nt + 2 * tq) =
          make_float2(s[nt][2 * hf], s[nt][2 * hf + 1]);
    }
}

void check(const KdaBatch& b, int64_t start_position) {
  SPARKGLM_ASSERT(b.num_seqs > 0 && b.rows_per_seq > 0 && b.heads > 0 && b.num_seqs <= 65535 &&
                      b.heads <= 65535 && start_position >= 0,
                  "kda_chunked: batch shape or start position out of range");
  if (b.head_dim != kK)
    throw Error(ErrorKind::kUnsupported,
                "kda_chunked_prefill: linear_attn_config.head_dim " + std::to_string(b.head_dim) +
                    " (the chunked form is specialised to " + std::to_string(kK) +
                    "; kda_recurrent serves " + std::to_string(kKdaMicroHeadDim) + ")");
}

}  // namespace

void kda_chunked_prefill(const KdaBatch& batch, int64_t start_position, const float* q,
                         const float* k, const float* v, const float* decay, const float* beta,
                         float* state, float* o, cudaStream_t stream) {
  check(batch, start_position);
  const int chunks = chunk_count(start_position, batch.rows_per_seq);
  const ChunkArgs args{batch, start_position, chunks, q, k, v, decay, beta, state, o};
  constexpr int bytes = Layout::kBytes;
  SPARKGLM_CUDA_CHECK(
      cudaFuncSetAttribute(chunked_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  chunked_kernel<<<dim3(kK / kVB, unsigned(batch.heads), unsigned(batch.num_seqs)), kThreads, bytes,
                   stream>>>(args);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
