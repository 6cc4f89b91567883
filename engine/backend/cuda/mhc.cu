#include "engine/backend/cuda/mhc.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/backend/cuda/rms_row.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;
// Blocks a row of hc_finish_kernel (the width is cut into this many parts; 4 divides D / 4 of
// every width).
constexpr int kFinishSlices = 4;

// The kernels are instantiated for the two widths the runner serves (mhc.h): kHcWidth and
// kHcMicroWidth. Every constant below follows from D, so the production instantiation is the
// code of the single-width kernels.
template <int kD>
struct HcShape {
  static constexpr int kN = kHcStreams * kD;  // 16384 values in a production row
  // One-block-per-row form: 256 threads (16 float4 each, 4 per stream) in production; narrower
  // rows take fewer threads so that each still holds one float4 of every stream.
  static constexpr int kReduceThreads = kN / 16 < kThreads ? kN / 16 : kThreads;
  static constexpr int kVecPerThread = kN / 4 / kReduceThreads;
  static constexpr int kVecPerStream = kVecPerThread / kHcStreams;
  // Split form: 128 float4 per slice (one per thread), 32 slices in production, 2 at D = 256.
  static constexpr int kSliceVec = 128;
  static constexpr int kSlices = kN / 4 / kSliceVec;
  // hc_post: 16 column slices of 64 threads in production; one slice at D = 256.
  static constexpr int kPostSlices = kD / 4 / 64 < 16 ? kD / 4 / 64 : 16;
  static constexpr int kPerSlice = kD / 4 / kPostSlices;
  static_assert(kVecPerStream >= 1 && kN % (4 * kSliceVec) == 0 &&
                    kPerSlice * kPostSlices * 4 == kD,
                "mHC: the width must be a multiple of 256");
};

void check_width(int width) {
  if (width != kHcWidth && width != kHcMicroWidth)
    throw Error(ErrorKind::kUnsupported, "mHC kernels: hidden_size " + std::to_string(width) +
                                             " (served: " + std::to_string(kHcWidth) + ", " +
                                             std::to_string(kHcMicroWidth) + ")");
}

struct HcParams {
  HcConstants k;
  const float* fn;
  const float* base;
  const float* scale;
  const float* X;
  float* y;
  float* post;
  float* comb;
};

// Float4 index u of a thread covers stream u / kVecPerStream and width position
// threadIdx.x + kReduceThreads * (u % kVecPerStream) (in float4 units), so one thread holds all 4
// streams at the same positions and forms y without exchanging data.
template <int kD>
__device__ __forceinline__ int vec_index(int u) {
  return threadIdx.x + HcShape<kD>::kReduceThreads * u;
}

// y at float4 column c of the width: sum_s pre[s] X[s], s increasing (the pre's mix; x4: the
// row's [4, D] values). Every kernel that forms y calls this, so every one has its bits.
template <int kD>
__device__ __forceinline__ float4 pre_mix(const float4* x4, const float* pre, int c) {
  float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int s = 0; s < kHcStreams; ++s) {
    const float4 xv = x4[s * (kD / 4) + c];
    acc.x += pre[s] * xv.x, acc.y += pre[s] * xv.y, acc.z += pre[s] * xv.z, acc.w += pre[s] * xv.w;
  }
  return acc;
}

// Stream s of the residual after hc_post at one float4 column: post_s * b + sum over s'
// (increasing) of comb[s][s'] * X[s'] (old: the 4 streams' values there before; comb_row: row s
// of comb). hc_post_kernel and hc_post_partial_kernel both call this: the same bits.
__device__ __forceinline__ float4 post_mix(const float4 (&old)[kHcStreams], float4 bv, float pst,
                                           const float* comb_row) {
  float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int j = 0; j < kHcStreams; ++j) {
    acc.x += comb_row[j] * old[j].x, acc.y += comb_row[j] * old[j].y;
    acc.z += comb_row[j] * old[j].z, acc.w += comb_row[j] * old[j].w;
  }
  return make_float4(pst * bv.x + acc.x, pst * bv.y + acc.y, pst * bv.z + acc.z,
                     pst * bv.w + acc.w);
}

// cpu::hc_pre's Sinkhorn on one 4x4 matrix, in place (one thread).
__device__ void sinkhorn(float* m, int iters, float eps) {
  for (int s = 0; s < kHcStreams; ++s) {
    float mx = m[s * 4];
    for (int j = 1; j < 4; ++j) mx = fmaxf(mx, m[s * 4 + j]);
    float sum = 0.0f;
    for (int j = 0; j < 4; ++j) {
      m[s * 4 + j] = expf(m[s * 4 + j] - mx);
      sum += m[s * 4 + j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < 4; ++j) m[s * 4 + j] = m[s * 4 + j] * inv + eps;
  }
  auto columns = [&] {
    for (int j = 0; j < 4; ++j) {
      float sum = 0.0f;
      for (int s = 0; s < 4; ++s) sum += m[s * 4 + j];
      const float den = sum + eps;
      for (int s = 0; s < 4; ++s) m[s * 4 + j] /= den;
    }
  };
  columns();
  for (int it = 1; it < iters; ++it) {
    for (int s = 0; s < 4; ++s) {
      float sum = 0.0f;
      for (int j = 0; j < 4; ++j) sum += m[s * 4 + j];
      const float den = sum + eps;
      for (int j = 0; j < 4; ++j) m[s * 4 + j] /= den;
    }
    columns();
  }
}

// From the raw sums (mixes, then the sum of squares; one thread): pre into `pre`, and for a
// layer site post and the Sinkhorn-balanced comb into p.post / p.comb at row t.
template <int kD, int kMix>
__device__ void finish_mixes(const HcParams& p, int64_t t, float* mixes, float* pre) {
  const float rs = 1.0f / sqrtf(mixes[kMix] / float(HcShape<kD>::kN) + p.k.rms_eps);
  for (int j = 0; j < kMix; ++j) mixes[j] = mixes[j] * rs;
  for (int s = 0; s < kHcStreams; ++s)
    pre[s] = sigmoidf_dev(mixes[s] * p.scale[0] + p.base[s]) + p.k.hc_eps;
  if (kMix > kHcStreams) {
    for (int s = 0; s < kHcStreams; ++s)
      p.post[t * kHcStreams + s] =
          2.0f * sigmoidf_dev(mixes[kHcStreams + s] * p.scale[1] + p.base[kHcStreams + s]);
    float m[16];
    for (int i = 0; i < 16 && 2 * kHcStreams + i < kMix; ++i)
      m[i] = mixes[2 * kHcStreams + i] * p.scale[2] + p.base[2 * kHcStreams + i];
    sinkhorn(m, p.k.sinkhorn_iters, p.k.hc_eps);
    for (int i = 0; i < 16; ++i) p.comb[t * 16 + i] = m[i];
  }
}

// Grid: T. kMix = 24 (a layer site: pre, post, comb) or 4 (the head: pre only).
template <int kD, int kMix>
__global__ void __launch_bounds__(HcShape<kD>::kReduceThreads)
    hc_reduce_kernel(const __grid_constant__ HcParams p) {
  using S = HcShape<kD>;
  constexpr int kN = S::kN, kVecPerThread = S::kVecPerThread, kVecPerStream = S::kVecPerStream;
  __shared__ float warp_part[S::kReduceThreads / 32][kMix + 1];
  __shared__ float pre[kHcStreams];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(p.X + t * kN);
  float4 v[kVecPerThread];
#pragma unroll
  for (int u = 0; u < kVecPerThread; ++u) v[u] = x4[vec_index<kD>(u)];

  float part[kMix + 1];  // [mixes..., sum of squares]
#pragma unroll
  for (int j = 0; j <= kMix; ++j) part[j] = 0.0f;
#pragma unroll
  for (int u = 0; u < kVecPerThread; ++u) {
    part[kMix] = fmaf(v[u].x, v[u].x, part[kMix]);
    part[kMix] = fmaf(v[u].y, v[u].y, part[kMix]);
    part[kMix] = fmaf(v[u].z, v[u].z, part[kMix]);
    part[kMix] = fmaf(v[u].w, v[u].w, part[kMix]);
  }
#pragma unroll 4
  for (int j = 0; j < kMix; ++j) {
    const float4* f4 = reinterpret_cast<const float4*>(p.fn + int64_t(j) * kN);
    float acc = 0.0f;
#pragma unroll
    for (int u = 0; u < kVecPerThread; ++u) {
      const float4 f = __ldg(f4 + vec_index<kD>(u));
      acc = fmaf(f.x, v[u].x, acc);
      acc = fmaf(f.y, v[u].y, acc);
      acc = fmaf(f.z, v[u].z, acc);
      acc = fmaf(f.w, v[u].w, acc);
    }
    part[j] = acc;
  }
#pragma unroll
  for (int j = 0; j <= kMix; ++j) {
    const float s = warp_sum(part[j]);
    if (lane == 0) warp_part[warp][j] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float mixes[kMix + 1];
    for (int j = 0; j <= kMix; ++j) {
      float s = 0.0f;
      for (int w = 0; w < S::kReduceThreads / 32; ++w) s += warp_part[w][j];
      mixes[j] = s;
    }
    finish_mixes<kD, kMix>(p, t, mixes, pre);
  }
  __syncthreads();
  // y = sum_s pre[s] X[s], s increasing, at this thread's width positions.
  float4* y4 = reinterpret_cast<float4*>(p.y + t * kD);
#pragma unroll
  for (int c = 0; c < kVecPerStream; ++c) {
    float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int s = 0; s < kHcStreams; ++s) {
      const float4 xv = v[s * kVecPerStream + c];
      acc.x += pre[s] * xv.x, acc.y += pre[s] * xv.y, acc.z += pre[s] * xv.z,
          acc.w += pre[s] * xv.w;
    }
    y4[vec_index<kD>(c)] = acc;
  }
}

// fn's float4s at float4 i of a row (fn is the model's, so it may be requested before the wait).
template <int kD, int kMix>
__device__ __forceinline__ void load_fn(const float* fn, int64_t i, float4 (&f)[kMix]) {
#pragma unroll
  for (int j = 0; j < kMix; ++j)
    f[j] = __ldg(reinterpret_cast<const float4*>(fn + int64_t(j) * HcShape<kD>::kN) + i);
}

// A slice's kMix + 1 sums of row t from each thread's float4 v of the row and f (fn there), into
// partials: every split-form kernel's one order of sums.
template <int kD, int kMix>
__device__ __forceinline__ void slice_sums(const float4 (&f)[kMix], float4 v, int64_t t,
                                           float* partials) {
  using S = HcShape<kD>;
  __shared__ float warp_part[S::kSliceVec / 32][kMix + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float part[kMix + 1];
  part[kMix] = fmaf(v.w, v.w, fmaf(v.z, v.z, fmaf(v.y, v.y, v.x * v.x)));
#pragma unroll
  for (int j = 0; j < kMix; ++j)
    part[j] = fmaf(f[j].w, v.w, fmaf(f[j].z, v.z, fmaf(f[j].y, v.y, f[j].x * v.x)));
#pragma unroll
  for (int j = 0; j <= kMix; ++j) {
    const float s = warp_sum(part[j]);
    if (lane == 0) warp_part[warp][j] = s;
  }
  __syncthreads();
  if (threadIdx.x <= kMix) {
    float s = 0.0f;
    for (int w = 0; w < S::kSliceVec / 32; ++w) s += warp_part[w][threadIdx.x];
    partials[(t * S::kSlices + blockIdx.x) * (kMix + 1) + threadIdx.x] = s;
  }
}

// The split form (every row the engine runs; G1 also times one block per row): the row's 4*D
// values are cut into kSlices slices of 128 float4 (32 in production), one block each, so the 24
// dot products stream fn with the whole GPU instead of one SM. Each block writes its kMix + 1
// partial sums (mixes, then the sum of squares); hc_finish_kernel adds them in slice order (fixed,
// so a row's result does not depend on the batch) and applies the rest.
template <int kD, int kMix>
__global__ void __launch_bounds__(HcShape<kD>::kSliceVec)
    hc_partial_kernel(const __grid_constant__ HcParams p, float* partials) {
  using S = HcShape<kD>;
  const int64_t t = blockIdx.y;
  const int64_t i = int64_t(blockIdx.x) * S::kSliceVec + threadIdx.x;  // float4 index in the row
  // fn is the model's (no kernel writes it): requested before the wait, while the kernel ahead
  // still runs; X is that kernel's, read after it (pdl.cuh).
  float4 f[kMix];
  load_fn<kD, kMix>(p.fn, i, f);
  pdl_wait();
  pdl_trigger();
  slice_sums<kD, kMix>(f, reinterpret_cast<const float4*>(p.X + t * S::kN)[i], t, partials);
}

// hc_post_kernel, then hc_partial_kernel on its result, in one launch (decode-sized steps: a
// HcFold with a post): each thread forms its float4 of the residual after the post from the 4
// streams' old values there, writes it to fold.X_next (X stays as it was: blocks of the other
// streams still read it) and sums it into its slice as hc_partial_kernel does.
template <int kD, int kMix>
__global__ void __launch_bounds__(HcShape<kD>::kSliceVec)
    hc_post_partial_kernel(const __grid_constant__ HcParams p, const __grid_constant__ HcFold fold,
                           float* partials) {
  using S = HcShape<kD>;
  constexpr int kW = kD / 4;  // float4 a stream
  const int64_t t = blockIdx.y;
  const int64_t i = int64_t(blockIdx.x) * S::kSliceVec + threadIdx.x;
  float4 f[kMix];
  load_fn<kD, kMix>(p.fn, i, f);
  pdl_wait();
  pdl_trigger();
  const int s = int(i / kW), c = int(i % kW);
  const float4* x4 = reinterpret_cast<const float4*>(p.X + t * S::kN);
  float4 old[kHcStreams];
#pragma unroll
  for (int j = 0; j < kHcStreams; ++j) old[j] = x4[j * kW + c];
  const float4 bv = reinterpret_cast<const float4*>(fold.b + t * kD)[c];
  float comb_row[kHcStreams];
#pragma unroll
  for (int j = 0; j < kHcStreams; ++j) comb_row[j] = fold.comb[t * 16 + s * 4 + j];
  const float4 v = post_mix(old, bv, fold.post[t * kHcStreams + s], comb_row);
  reinterpret_cast<float4*>(fold.X_next + t * S::kN)[i] = v;
  slice_sums<kD, kMix>(f, v, t, partials);
}

// Sinkhorn with one lane per matrix element (lanes 0..15 of a warp, element i = 4 s + j), bit for
// bit the serial sinkhorn(): every sum gathers its four terms by shuffle and adds them in the
// serial order. All 32 lanes must call it; lanes 16..31 shadow lanes 0..15.
__device__ float sinkhorn_lanes(float v, int iters, float eps) {
  const int lane = threadIdx.x & 31, i = lane & 15, s = i >> 2, j = i & 3;
  auto gather_sum = [&](float x, int first, int step) {
    float sum = 0.0f;
    for (int q = 0; q < 4; ++q) sum += __shfl_sync(0xffffffffu, x, first + q * step);
    return sum;
  };
  float mx = __shfl_sync(0xffffffffu, v, s * 4);
  for (int q = 1; q < 4; ++q) mx = fmaxf(mx, __shfl_sync(0xffffffffu, v, s * 4 + q));
  v = expf(v - mx);
  const float inv = 1.0f / gather_sum(v, s * 4, 1);
  v = v * inv + eps;
  v = v / (gather_sum(v, j, 4) + eps);  // columns
  for (int it = 1; it < iters; ++it) {
    v = v / (gather_sum(v, s * 4, 1) + eps);  // rows
    v = v / (gather_sum(v, j, 4) + eps);      // columns
  }
  return v;
}

// Sums row t's slice partials (one thread per sum, slices in order), then pre into `pre`; block 0
// of the row (`first`) also writes post and the Sinkhorn-balanced comb (warp 0). Every block
// computes pre from the same partials by the same code, so the same bits. Ends in a barrier.
template <int kD, int kMix>
__device__ __forceinline__ void finish_pre(const HcParams& p, const float* partials, int64_t t,
                                           bool first, float* mixes, float* pre) {
  using S = HcShape<kD>;
  if (threadIdx.x <= kMix) {
    float sum = 0.0f;
    for (int b = 0; b < S::kSlices; ++b)
      sum += partials[(t * S::kSlices + b) * (kMix + 1) + threadIdx.x];
    mixes[threadIdx.x] = sum;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    const float rs = 1.0f / sqrtf(mixes[kMix] / float(S::kN) + p.k.rms_eps);
    if (lane < kHcStreams)
      pre[lane] = sigmoidf_dev(mixes[lane] * rs * p.scale[0] + p.base[lane]) + p.k.hc_eps;
    if (kMix > kHcStreams && first) {
      if (lane < kHcStreams)
        p.post[t * kHcStreams + lane] =
            2.0f *
            sigmoidf_dev(mixes[kHcStreams + lane] * rs * p.scale[1] + p.base[kHcStreams + lane]);
      const int i = 2 * kHcStreams + (lane & 15);
      const float m = mixes[i < kMix ? i : 0] * rs * p.scale[2] + p.base[i < kMix ? i : 0];
      const float balanced = sinkhorn_lanes(m, p.k.sinkhorn_iters, p.k.hc_eps);
      if (lane < 16) p.comb[t * 16 + lane] = balanced;
    }
  }
  __syncthreads();
}

// Grid: (T, kFinishSlices). finish_pre, then y = sum_s pre[s] X[s] over this block's quarter of
// the width, as hc_reduce_kernel does; the width is cut so that the row's 4 x D reads run on four
// multiprocessors instead of one.
template <int kD, int kMix>
__global__ void __launch_bounds__(kThreads)
    hc_finish_kernel(const __grid_constant__ HcParams p, const float* partials) {
  __shared__ float mixes[kMix + 1];
  __shared__ float pre[kHcStreams];
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  finish_pre<kD, kMix>(p, partials, t, blockIdx.y == 0, mixes, pre);
  const float4* x4 = reinterpret_cast<const float4*>(p.X + t * HcShape<kD>::kN);
  float4* y4 = reinterpret_cast<float4*>(p.y + t * kD);
  constexpr int kPer = kD / 4 / kFinishSlices;
  static_assert(kPer * kFinishSlices * 4 == kD, "hc_finish_kernel: the slices must cut the width");
  for (int c = int(blockIdx.y) * kPer + threadIdx.x; c < int(blockIdx.y + 1) * kPer;
       c += blockDim.x)
    y4[c] = pre_mix<kD>(x4, pre, c);
}

// hc_finish_kernel, then rms_norm_rows(y, fold.norm_w, fold.norm_eps) in one launch (decode-sized
// steps: a HcFold with a norm): every block of a row forms the whole row's y, in the layout of
// rms_norm_kernel's cached path (float4 i = thread + 256 u), so each takes that norm's one order of
// sums (rms_row.cuh); block b writes quarter b of y, of the normed row and of its BF16 bits.
template <int kD, int kMix>
__global__ void __launch_bounds__(kThreads)
    hc_finish_norm_kernel(const __grid_constant__ HcParams p, const float* partials,
                          const __grid_constant__ HcFold fold) {
  using rms_row::kCachedVec;
  constexpr int kW = kD / 4, kPer = kW / kFinishSlices;
  static_assert(kThreads == rms_row::kThreads && kW <= kCachedVec * kThreads,
                "hc_finish_norm_kernel: the row must be a cached rms_norm row");
  __shared__ float mixes[kMix + 1];
  __shared__ float pre[kHcStreams];
  __shared__ float scratch[32];
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  finish_pre<kD, kMix>(p, partials, t, blockIdx.y == 0, mixes, pre);
  const float4* x4 = reinterpret_cast<const float4*>(p.X + t * HcShape<kD>::kN);
  float4 yv[kCachedVec], wv[kCachedVec];
#pragma unroll
  for (int u = 0; u < kCachedVec; ++u) {
    const int i = threadIdx.x + u * kThreads;
    yv[u] = i < kW ? pre_mix<kD>(x4, pre, i) : make_float4(0, 0, 0, 0);
    wv[u] = rms_row::load4_or(fold.norm_w, i, i < kW, 1.0f);
  }
  const float r = rms_row::rms_scale(yv, kD, fold.norm_eps, scratch);
#pragma unroll
  for (int u = 0; u < kCachedVec; ++u) {
    const int i = threadIdx.x + u * kThreads;
    if (i >= kW || i / kPer != int(blockIdx.y)) continue;
    reinterpret_cast<float4*>(p.y + t * kD)[i] = yv[u];
    const float4 v = rms_row::scaled(yv[u], r, wv[u]);
    reinterpret_cast<float4*>(fold.normed + t * kD)[i] = v;
    if (fold.normed_bf16) rms_row::store_bf16x4(fold.normed_bf16 + t * kD + 4 * i, v);
  }
}

// Grid: (T, kPostSlices); each thread a float4 column block of the row's 4 streams, the slices
// cutting the row's columns so that a decode step's few rows still fill the GPU.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    hc_post_kernel(const float* b, const float* post, const float* comb, float* X) {
  using S = HcShape<kD>;
  pdl_wait();
  pdl_trigger();
  const int64_t t = blockIdx.x;
  constexpr int kPerSlice = S::kPerSlice;
  float4* x4 = reinterpret_cast<float4*>(X + t * S::kN);
  const float4* b4 = reinterpret_cast<const float4*>(b + t * kD);
  float pst[kHcStreams], cm[16];
  for (int s = 0; s < kHcStreams; ++s) pst[s] = post[t * kHcStreams + s];
  for (int i = 0; i < 16; ++i) cm[i] = comb[t * 16 + i];
  for (int c = int(blockIdx.y) * kPerSlice + threadIdx.x; c < int(blockIdx.y + 1) * kPerSlice;
       c += blockDim.x) {
    float4 old[kHcStreams];
#pragma unroll
    for (int s = 0; s < kHcStreams; ++s) old[s] = x4[s * (kD / 4) + c];
    const float4 bv = b4[c];
#pragma unroll
    for (int s = 0; s < kHcStreams; ++s)
      x4[s * (kD / 4) + c] = post_mix(old, bv, pst[s], cm + 4 * s);
  }
}

// fold: the decode-sized step's launches (mhc.h's HcFold), which need the split form's partials.
template <int kD, int kMix>
void launch_reduce(const HcParams& p, int64_t T, float* partials, const HcFold* fold,
                   cudaStream_t stream) {
  using S = HcShape<kD>;
  const dim3 slices(S::kSlices, unsigned(T)), finish(unsigned(T), kFinishSlices);
  HcParams q = p;  // the finish's: it reads the residual the post wrote
  if (fold && fold->b) {
    launch_dependent(hc_post_partial_kernel<kD, kMix>, slices, S::kSliceVec, 0, stream, p, *fold,
                     partials);
    q.X = fold->X_next;
  } else if (partials) {
    launch_dependent(hc_partial_kernel<kD, kMix>, slices, S::kSliceVec, 0, stream, p, partials);
  }
  if (fold && fold->norm_w) {
    launch_dependent(hc_finish_norm_kernel<kD, kMix>, finish, kThreads, 0, stream, q,
                     static_cast<const float*>(partials), *fold);
  } else if (partials) {
    launch_dependent(hc_finish_kernel<kD, kMix>, finish, kThreads, 0, stream, q,
                     static_cast<const float*>(partials));
  } else {
    hc_reduce_kernel<kD, kMix><<<unsigned(T), S::kReduceThreads, 0, stream>>>(p);
  }
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

template <int kMix>
void launch_reduce(int width, const HcParams& p, int64_t T, float* partials, const HcFold* fold,
                   cudaStream_t stream) {
  check_width(width);
  if (fold) {
    SPARKGLM_ASSERT(partials, "mHC: a fold needs the split form's partials");
    SPARKGLM_ASSERT(!fold->b || (fold->post && fold->comb && fold->X_next && fold->X_next != p.X),
                    "mHC: a folded post needs post, comb and a separate X_next");
    SPARKGLM_ASSERT(!fold->norm_w || fold->normed, "mHC: a folded norm needs its output");
  }
  if (width == kHcWidth) {
    launch_reduce<kHcWidth, kMix>(p, T, partials, fold, stream);
  } else {
    launch_reduce<kHcMicroWidth, kMix>(p, T, partials, fold, stream);
  }
}

}  // namespace

int64_t hc_partials_floats(int64_t T) {
  return T * HcShape<kHcWidth>::kSlices * (kHcMixes + 1);  // the widest: enough for every width
}

void hc_pre(const HcConstants& k, const float* fn, const float* base, const float* scale,
            const float* X, int64_t T, float* y, float* post, float* comb, cudaStream_t stream,
            float* partials) {
  if (T <= 0) return;
  launch_reduce<kHcMixes>(k.width, HcParams{k, fn, base, scale, X, y, post, comb}, T, partials,
                          nullptr, stream);
}

void hc_pre_folded(const HcConstants& k, const float* fn, const float* base, const float* scale,
                   const float* X, int64_t T, float* y, float* post, float* comb, float* partials,
                   const HcFold& fold, cudaStream_t stream) {
  if (T <= 0) return;
  launch_reduce<kHcMixes>(k.width, HcParams{k, fn, base, scale, X, y, post, comb}, T, partials,
                          &fold, stream);
}

void hc_post(const float* b, const float* post, const float* comb, float* X, int64_t T,
             cudaStream_t stream, int width) {
  check_width(width);
  if (T <= 0) return;
  if (width == kHcWidth) {
    using S = HcShape<kHcWidth>;
    launch_dependent(hc_post_kernel<kHcWidth>, dim3(unsigned(T), S::kPostSlices), S::kPerSlice, 0,
                     stream, b, post, comb, X);
  } else {
    using S = HcShape<kHcMicroWidth>;
    launch_dependent(hc_post_kernel<kHcMicroWidth>, dim3(unsigned(T), S::kPostSlices), S::kPerSlice,
                     0, stream, b, post, comb, X);
  }
}

void hc_head(const HcConstants& k, const float* fn, const float* base, const float* scale,
             const float* X, int64_t T, float* h, cudaStream_t stream, float* partials) {
  if (T <= 0) return;
  launch_reduce<kHcStreams>(k.width, HcParams{k, fn, base, scale, X, h, nullptr, nullptr}, T,
                            partials, nullptr, stream);
}

void hc_head_folded(const HcConstants& k, const float* fn, const float* base, const float* scale,
                    const float* X, int64_t T, float* h, float* partials, const HcFold& fold,
                    cudaStream_t stream) {
  if (T <= 0) return;
  launch_reduce<kHcStreams>(k.width, HcParams{k, fn, base, scale, X, h, nullptr, nullptr}, T,
                            partials, &fold, stream);
}

}  // namespace sparkglm::cuda
