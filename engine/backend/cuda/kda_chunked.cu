#include "engine/backend/cuda/kda_chunked.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kC = kKdaChunkLen;  // positions per chunk
constexpr int kK = kKdaHeadDim;   // K = V
constexpr int kSub = 16;          // exponent reference blocks, as on the CPU
constexpr int kVB = 64;           // value columns per scan block
// Shared-memory row strides chosen so the mma fragment loads hit 32 distinct banks.
constexpr int kLdK = kK + 4;   // rows of K floats
constexpr int kLdC = kC + 4;   // rows of C floats
constexpr int kLdS = kVB + 8;  // rows of kVB floats
constexpr int kThreads = 256;
constexpr int64_t kRecKC = int64_t(kC) * kK;  // floats of a [C, K] workspace record

// Workspace per (sequence, head, chunk) record; each array is [records][...].
struct Workspace {
  float* w;   // [C, K]: T (e^G * k)
  float* u;   // [C, V]: T v
  float* qg;  // [C, K]: e^G * q
  float* ke;  // [C, K]: beta_s k_s e^{G_C - G_s}
  float* bm;  // [C, C]: beta_s ((e^{G_t - G_s} * k_s) . q_t) for s <= t, else 0
  float* ge;  // [K]: e^{G_C}
};

__host__ __device__ inline int first_chunk_len(int64_t start, int n) {
  const int f = int(kC - start % kC);
  return f < n ? f : n;
}
__host__ __device__ inline int chunk_count(int64_t start, int n) {
  return 1 + (n - first_chunk_len(start, n) + kC - 1) / kC;
}

Workspace carve(void* base, int64_t records) {
  float* p = static_cast<float*>(base);
  Workspace ws;
  ws.w = p;
  ws.u = ws.w + records * kRecKC;
  ws.qg = ws.u + records * kRecKC;
  ws.ke = ws.qg + records * kRecKC;
  ws.bm = ws.ke + records * kRecKC;
  ws.ge = ws.bm + records * kC * kC;
  return ws;
}
constexpr int64_t kWorkspaceFloatsPerRecord = 4 * kRecKC + kC * kC + kK;

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
  Workspace ws;
};

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// c += A[16 x depth] B[depth x 8] on tensor cores (m16n8k8, TF32 in, FP32 accumulate) for the
// calling warp; A(m, x) = a[m * am + x * ax], B(x, n) = b[x * bx + n * bn], depth % 8 == 0.
// Fragment element e of c is row (lane >> 2) + 8 * (e >> 1), column 2 * (lane & 3) + (e & 1).
__device__ __forceinline__ void tile_mma(float (&c)[4], const float* a, int am, int ax,
                                         const float* b, int bx, int bn, int depth) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  for (int x0 = 0; x0 < depth; x0 += 8) {
    const int xa = x0 + t, xb = x0 + t + 4;
    const uint32_t a0 = to_tf32(a[g * am + xa * ax]), a1 = to_tf32(a[(g + 8) * am + xa * ax]);
    const uint32_t a2 = to_tf32(a[g * am + xb * ax]), a3 = to_tf32(a[(g + 8) * am + xb * ax]);
    const uint32_t b0 = to_tf32(b[xa * bx + g * bn]), b1 = to_tf32(b[xb * bx + g * bn]);
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}
__device__ __forceinline__ void prefetch_l2(const float* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
__device__ __forceinline__ int frag_row(int e) {
  return ((threadIdx.x & 31) >> 2) + 8 * (e >> 1);
}
__device__ __forceinline__ int frag_col(int e) {
  return 2 * (threadIdx.x & 3) + (e & 1);
}

// Shared memory of the chunk kernel, in floats.
struct PrepLayout {
  static constexpr int kG = 0;                   // [C, K]: G_t, FP32 (summed in FP64)
  static constexpr int kR = kG + kC * kK;        // [C, ldK]: right factors, later e^G k and v
  static constexpr int kA = kR + kC * kLdK;      // [C, ldC]
  static constexpr int kT = kA + kC * kLdC;      // [C, ldC]: (I + A)^{-1}
  static constexpr int kLk = kT;                 // [16, ldK]: left key factors, before T exists
  static constexpr int kLq = kLk + kSub * kLdK;  // [16, ldK]: left query factors
  static constexpr int kFloats = kT + kC * kLdC;
  static_assert(2 * kSub * kLdK <= kC * kLdC, "the left factors must fit in T's space");
};

__device__ inline void chunk_rows(const ChunkArgs& p, int ci, int& r0, int& len) {
  const int n = p.batch.rows_per_seq, first = first_chunk_len(p.start, n);
  r0 = ci == 0 ? 0 : first + (ci - 1) * kC;
  len = ci == 0 ? first : min(kC, n - r0);
}

// out[C, K] = T[C, C] x[C, ldK] (T lower triangular), written to global memory.
__device__ inline void lower_times(const float* tinv, const float* x, float* out) {
  const int warp = threadIdx.x >> 5;
  for (int tile = warp; tile < (kC / 16) * (kK / 8); tile += kThreads / 32) {
    const int mt = tile / (kK / 8), nt = tile % (kK / 8);
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    tile_mma(c, tinv + mt * 16 * kLdC, kLdC, 1, x + nt * 8, kLdK, 1, (mt + 1) * 16);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[(mt * 16 + frag_row(e)) * kK + nt * 8 + frag_col(e)] = c[e];
  }
}

// Grid: (chunks, H, B); everything of one chunk that does not depend on the state.
__global__ void __launch_bounds__(kThreads) prep_kernel(const __grid_constant__ ChunkArgs p) {
  extern __shared__ float sm[];
  float* G = sm + PrepLayout::kG;
  float* lk = sm + PrepLayout::kLk;
  float* lq = sm + PrepLayout::kLq;
  float* r = sm + PrepLayout::kR;
  float* A = sm + PrepLayout::kA;
  float* T = sm + PrepLayout::kT;
  const int ci = blockIdx.x, h = blockIdx.y, seq = blockIdx.z, tid = threadIdx.x;
  const int heads = p.batch.heads, warp = tid >> 5;
  int r0, len;
  chunk_rows(p, ci, r0, len);
  const int64_t hk = int64_t(heads) * kK;
  const int64_t row0 = int64_t(seq) * p.batch.rows_per_seq + r0;
  const int64_t base = row0 * hk + int64_t(h) * kK;  // (t, i) at base + t * hk + i
  const float* beta = p.beta + row0 * heads + h;     // beta_t at beta[t * heads]
  const int64_t rec = (int64_t(seq) * heads + h) * p.chunks + ci;

  for (int x = tid; x < kC * kK; x += kThreads) {
    const int t = x / kK;
    G[x] = t < len ? logf(p.decay[base + t * hk + x % kK]) : 0.0f;
  }
  for (int x = tid; x < kC * kLdC; x += kThreads) A[x] = 0.0f;
  __syncthreads();
  if (tid < kK) {
    double acc = 0.0;  // FP64 so that G near -320 keeps its small steps
    for (int t = 0; t < kC; ++t) {
      acc += double(G[t * kK + tid]);
      G[t * kK + tid] = float(acc);
    }
  }
  // B goes straight to the workspace; zeros where no Gram tile below writes.
  const int nsub = (len + kSub - 1) / kSub;
  float* bm = p.ws.bm + rec * kC * kC;
  for (int x = tid; x < kC * kC; x += kThreads) {
    const int tb = x / kC / kSub, sb = x % kC / kSub;
    if (tb >= nsub || sb > tb) bm[x] = 0.0f;
  }
  __syncthreads();

  // Gram matrices per 16-row block j: the diagonal block with the reference in its middle, then
  // the earlier columns with the reference just before the block (the CPU's choice).
  for (int j = 0; j < nsub; ++j) {
    const int t0 = j * kSub, nt = min(kSub, len - t0);
    for (int pass = 0; pass < (j > 0 ? 2 : 1); ++pass) {
      const int ref = pass == 0 ? t0 + nt / 2 : t0 - 1;
      const int s0 = pass == 0 ? t0 : 0, ns = pass == 0 ? kSub : t0;
      const float* gref = G + ref * kK;
      for (int x = tid; x < kSub * kK; x += kThreads) {
        const int tt = x / kK, i = x % kK, t = t0 + tt;
        float lkv = 0.0f, lqv = 0.0f;
        if (t < len) {
          const float e = expf(G[t * kK + i] - gref[i]);
          lkv = p.k[base + t * hk + i] * e;
          lqv = p.q[base + t * hk + i] * e;
        }
        lk[tt * kLdK + i] = lkv;
        lq[tt * kLdK + i] = lqv;
      }
      for (int x = tid; x < ns * kK; x += kThreads) {
        const int ss = x / kK, i = x % kK, s = s0 + ss;
        float rv = 0.0f;
        if (s < len) rv = beta[s * heads] * p.k[base + s * hk + i] * expf(gref[i] - G[s * kK + i]);
        r[ss * kLdK + i] = rv;
      }
      __syncthreads();
      for (int tile = warp; tile < 2 * (ns / 8); tile += kThreads / 32) {
        const int which = tile & 1, n8 = tile >> 1;
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        tile_mma(c, which ? lq : lk, kLdK, 1, r + n8 * 8 * kLdK, 1, kLdK, kK);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int tr = t0 + frag_row(e), sc = s0 + n8 * 8 + frag_col(e);
          const bool keep = pass == 1 || (which ? sc <= tr : sc < tr);
          if (which)
            bm[tr * kC + sc] = keep ? c[e] : 0.0f;
          else
            A[tr * kLdC + sc] = keep ? c[e] : 0.0f;
        }
      }
      __syncthreads();
    }
  }

  // T = (I + A)^{-1}: column-oriented forward substitution, one pivot per step; thread owns
  // column tid % C and rows tid / C + 4m.
  for (int x = tid; x < kC * kLdC; x += kThreads) T[x] = (x / kLdC == x % kLdC) ? 1.0f : 0.0f;
  __syncthreads();
  {
    const int col = tid % kC, rg = tid / kC;
    for (int s = 0; s + 1 < len; ++s) {
      const float xs = T[s * kLdC + col];
      for (int m = 0; m < kC / 4; ++m) {
        const int t = rg + 4 * m;
        if (t > s && t < len) T[t * kLdC + col] = fmaf(-A[t * kLdC + s], xs, T[t * kLdC + col]);
      }
      __syncthreads();
    }
  }

  // W = T (e^G * k), U = T v.
  for (int x = tid; x < kC * kK; x += kThreads) {
    const int t = x / kK, i = x % kK;
    r[t * kLdK + i] = t < len ? p.k[base + t * hk + i] * expf(G[t * kK + i]) : 0.0f;
  }
  __syncthreads();
  lower_times(T, r, p.ws.w + rec * kRecKC);
  __syncthreads();
  for (int x = tid; x < kC * kK; x += kThreads) {
    const int t = x / kK, i = x % kK;
    r[t * kLdK + i] = t < len ? p.v[base + t * hk + i] : 0.0f;
  }
  __syncthreads();
  lower_times(T, r, p.ws.u + rec * kRecKC);

  // e^G q, the end-of-chunk key factors and e^{G_C}.
  const float* gend = G + (len - 1) * kK;
  float* qg = p.ws.qg + rec * kRecKC;
  float* ke = p.ws.ke + rec * kRecKC;
  for (int x = tid; x < kC * kK; x += kThreads) {
    const int t = x / kK, i = x % kK;
    float qv = 0.0f, kv = 0.0f;
    if (t < len) {
      qv = p.q[base + t * hk + i] * expf(G[t * kK + i]);
      kv = beta[t * heads] * p.k[base + t * hk + i] * expf(gend[i] - G[t * kK + i]);
    }
    qg[x] = qv;
    ke[x] = kv;
  }
  if (tid < kK) p.ws.ge[rec * kK + tid] = expf(gend[tid]);
}

struct ScanLayout {
  static constexpr int kS = 0;                 // [K, ldS]: S[:, this block's columns]
  static constexpr int kW = kS + kK * kLdS;    // [C, ldK]
  static constexpr int kQg = kW + kC * kLdK;   // [C, ldK]
  static constexpr int kKe = kQg + kC * kLdK;  // [C, ldK]
  static constexpr int kU = kKe + kC * kLdK;   // [C, ldS]: U, then u = U - W S
  static constexpr int kBm = kU + kC * kLdS;   // [C, ldC]
  static constexpr int kGe = kBm + kC * kLdC;  // [K]
  static constexpr int kFloats = kGe + kK;
};

// rows x cols floats from global (row stride gld) to shared (row stride sld), float4 at a time.
__device__ inline void stage(float* dst, int sld, const float* src, int64_t gld, int rows,
                             int cols) {
  const int c4 = cols / 4;
#pragma unroll 4
  for (int x = threadIdx.x; x < rows * c4; x += kThreads) {
    const int rr = x / c4, cc = (x % c4) * 4;
    *reinterpret_cast<float4*>(dst + rr * sld + cc) =
        __ldg(reinterpret_cast<const float4*>(src + rr * gld + cc));
  }
}

// Grid: (V / kVB, H, B); the chunks of one sequence and head in order, for kVB value columns.
__global__ void __launch_bounds__(kThreads) scan_kernel(const __grid_constant__ ChunkArgs p) {
  extern __shared__ float sm[];
  float* S = sm + ScanLayout::kS;
  float* W = sm + ScanLayout::kW;
  float* Qg = sm + ScanLayout::kQg;
  float* Ke = sm + ScanLayout::kKe;
  float* U = sm + ScanLayout::kU;
  float* Bm = sm + ScanLayout::kBm;
  float* Ge = sm + ScanLayout::kGe;
  const int vb = blockIdx.x, h = blockIdx.y, seq = blockIdx.z, warp = threadIdx.x >> 5;
  const int heads = p.batch.heads;
  const int64_t hk = int64_t(heads) * kK;
  const int64_t slot = p.batch.slots ? int64_t(p.batch.slots[seq]) : int64_t(seq);
  float* state = p.state + (slot * heads + h) * kK * kK + vb * kVB;
  for (int x = threadIdx.x; x < kK * kVB; x += kThreads)
    S[(x / kVB) * kLdS + x % kVB] = state[(x / kVB) * kK + x % kVB];

  for (int ci = 0; ci < p.chunks; ++ci) {
    int r0, len;
    chunk_rows(p, ci, r0, len);
    const int64_t rec = (int64_t(seq) * heads + h) * p.chunks + ci;
    if (ci + 1 < p.chunks) {
      // The next chunk's record into L2 (128-byte lines) while this one computes.
      const int64_t nr = rec + 1;
      for (int x = threadIdx.x; x < 1024; x += kThreads) {
        const float* line;
        if (x < 768)
          line = (x < 256 ? p.ws.w : x < 512 ? p.ws.qg : p.ws.ke) + nr * kRecKC + (x % 256) * 32;
        else if (x < 896)
          line = p.ws.u + nr * kRecKC + (x - 768) / 2 * kK + vb * kVB + (x - 768) % 2 * 32;
        else
          line = p.ws.bm + nr * kC * kC + (x - 896) * 32;
        prefetch_l2(line);
      }
    }
    stage(W, kLdK, p.ws.w + rec * kRecKC, kK, kC, kK);
    stage(Qg, kLdK, p.ws.qg + rec * kRecKC, kK, kC, kK);
    stage(Ke, kLdK, p.ws.ke + rec * kRecKC, kK, kC, kK);
    stage(U, kLdS, p.ws.u + rec * kRecKC + vb * kVB, kK, kC, kVB);
    stage(Bm, kLdC, p.ws.bm + rec * kC * kC, kC, kC, kC);
    if (threadIdx.x < kK) Ge[threadIdx.x] = p.ws.ge[rec * kK + threadIdx.x];
    __syncthreads();

    // u = U - W S.
    for (int tile = warp; tile < (kC / 16) * (kVB / 8); tile += kThreads / 32) {
      const int mt = tile / (kVB / 8), nt = tile % (kVB / 8);
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      tile_mma(c, W + mt * 16 * kLdK, kLdK, 1, S + nt * 8, kLdS, 1, kK);
#pragma unroll
      for (int e = 0; e < 4; ++e) U[(mt * 16 + frag_row(e)) * kLdS + nt * 8 + frag_col(e)] -= c[e];
    }
    __syncthreads();

    // o = (e^G q) S + B u (B lower triangular with its diagonal).
    const int64_t obase = (int64_t(seq) * p.batch.rows_per_seq + r0) * hk + h * kK + vb * kVB;
    for (int tile = warp; tile < (kC / 16) * (kVB / 8); tile += kThreads / 32) {
      const int mt = tile / (kVB / 8), nt = tile % (kVB / 8);
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      tile_mma(c, Qg + mt * 16 * kLdK, kLdK, 1, S + nt * 8, kLdS, 1, kK);
      tile_mma(c, Bm + mt * 16 * kLdC, kLdC, 1, U + nt * 8, kLdS, 1, (mt + 1) * 16);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = mt * 16 + frag_row(e);
        if (t < len) p.o[obase + t * hk + nt * 8 + frag_col(e)] = c[e];
      }
    }
    __syncthreads();

    // S = diag(e^{G_C}) S + Ke^T u; each tile read and written by one warp.
    for (int tile = warp; tile < (kK / 16) * (kVB / 8); tile += kThreads / 32) {
      const int mt = tile / (kVB / 8), nt = tile % (kVB / 8);
      float c[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = mt * 16 + frag_row(e);
        c[e] = S[i * kLdS + nt * 8 + frag_col(e)] * Ge[i];
      }
      tile_mma(c, Ke + mt * 16, 1, kLdK, U + nt * 8, kLdS, 1, kC);
#pragma unroll
      for (int e = 0; e < 4; ++e) S[(mt * 16 + frag_row(e)) * kLdS + nt * 8 + frag_col(e)] = c[e];
    }
    __syncthreads();
  }
  for (int x = threadIdx.x; x < kK * kVB; x += kThreads)
    state[(x / kVB) * kK + x % kVB] = S[(x / kVB) * kLdS + x % kVB];
}

void check(const KdaBatch& b, int64_t start_position) {
  SPARKGLM_ASSERT(b.num_seqs > 0 && b.rows_per_seq > 0 && b.heads > 0 && b.num_seqs <= 65535 &&
                      b.heads <= 65535 && start_position >= 0,
                  "kda_chunked: batch shape or start position out of range");
}

}  // namespace

size_t kda_chunked_workspace_bytes(const KdaBatch& batch, int64_t start_position) {
  check(batch, start_position);
  const int64_t records =
      int64_t(batch.num_seqs) * batch.heads * chunk_count(start_position, batch.rows_per_seq);
  return size_t(records * kWorkspaceFloatsPerRecord) * sizeof(float);
}

namespace {

// Runs the chunk kernel (prep) and/or the scan kernel (scan) of one prefill.
void launch_chunked(const KdaBatch& batch, int64_t start_position, const float* q, const float* k,
                    const float* v, const float* decay, const float* beta, float* state, float* o,
                    void* workspace, cudaStream_t stream, bool prep, bool scan) {
  check(batch, start_position);
  SPARKGLM_ASSERT(workspace != nullptr, "kda_chunked_prefill: workspace is null");
  const int chunks = chunk_count(start_position, batch.rows_per_seq);
  const int64_t records = int64_t(batch.num_seqs) * batch.heads * chunks;
  const ChunkArgs args{batch, start_position,           chunks, q, k, v, decay, beta, state,
                       o,     carve(workspace, records)};
  constexpr int prep_bytes = PrepLayout::kFloats * 4, scan_bytes = ScanLayout::kFloats * 4;
  if (prep) {
    SPARKGLM_CUDA_CHECK(
        cudaFuncSetAttribute(prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, prep_bytes));
    prep_kernel<<<dim3(unsigned(chunks), unsigned(batch.heads), unsigned(batch.num_seqs)), kThreads,
                  prep_bytes, stream>>>(args);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
  }
  if (scan) {
    SPARKGLM_CUDA_CHECK(
        cudaFuncSetAttribute(scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, scan_bytes));
    scan_kernel<<<dim3(kK / kVB, unsigned(batch.heads), unsigned(batch.num_seqs)), kThreads,
                  scan_bytes, stream>>>(args);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void kda_chunked_prefill(const KdaBatch& batch, int64_t start_position, const float* q,
                         const float* k, const float* v, const float* decay, const float* beta,
                         float* state, float* o, void* workspace, cudaStream_t stream) {
  launch_chunked(batch, start_position, q, k, v, decay, beta, state, o, workspace, stream, true,
                 true);
}

void kda_chunked_prepare(const KdaBatch& batch, int64_t start_position, const float* q,
                         const float* k, const float* v, const float* decay, const float* beta,
                         void* workspace, cudaStream_t stream) {
  launch_chunked(batch, start_position, q, k, v, decay, beta, nullptr, nullptr, workspace, stream,
                 true, false);
}

void kda_chunked_scan(const KdaBatch& batch, int64_t start_position, float* state, float* o,
                      const void* workspace, cudaStream_t stream) {
  launch_chunked(batch, start_position, nullptr, nullptr, nullptr, nullptr, nullptr, state, o,
                 const_cast<void*>(workspace), stream, false, true);
}

void kda_prefill(const KdaBatch& batch, int64_t start_position, const float* q, const float* k,
                 const float* v, const float* decay, const float* beta, float* state, float* o,
                 void* workspace, cudaStream_t stream) {
  if (batch.rows_per_seq >= kKdaChunkedMinRows)
    kda_chunked_prefill(batch, start_position, q, k, v, decay, beta, state, o, workspace, stream);
  else
    kda_recurrent(batch, q, k, v, decay, beta, state, o, stream);
}

}  // namespace sparkglm::cuda
