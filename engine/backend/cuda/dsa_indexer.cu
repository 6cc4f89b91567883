#include "engine/backend/cuda/dsa_indexer.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kPoolTile = 32;  // pools per score block
constexpr int kMaxHeads = 64;
constexpr int kSelectThreads = 1024;

// Grid: pools; block: d_i threads.
__global__ void __launch_bounds__(kIndexDim)
    pool_kernel(const float* keys, const float* gates, const float* ape, float* pooled) {
  const int64_t p = blockIdx.x;
  float a[kIndexKpool];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kIndexKpool; ++i) {
    a[i] = gates[p * kIndexKpool + i] + ape[i];
    mx = fmaxf(mx, a[i]);
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kIndexKpool; ++i) {
    a[i] = expf(a[i] - mx);
    sum += a[i];
  }
  const float inv = 1.0f / sum;
  float out = 0.0f;
#pragma unroll
  for (int i = 0; i < kIndexKpool; ++i)
    out = fmaf(a[i] * inv, keys[(p * kIndexKpool + i) * kIndexDim + threadIdx.x], out);
  pooled[p * kIndexDim + threadIdx.x] = out;
}

struct ScoreParams {
  const float* q;
  const float* w;
  const float* pooled;
  float* scores;
  int64_t pools;
  int heads;
};

// Grid: (ceil(pools / 32), rows); 256 threads. Logits q_h . K_p for 32 pools x all heads go
// through shared memory; then one thread per pool sums the heads in increasing order.
__global__ void __launch_bounds__(256) score_kernel(const __grid_constant__ ScoreParams p) {
  __shared__ float keys[kPoolTile][kIndexDim + 1];
  __shared__ float logits[kMaxHeads][kPoolTile + 1];
  const int64_t row = blockIdx.y, p0 = int64_t(blockIdx.x) * kPoolTile;
  const int npool = p.pools - p0 < kPoolTile ? int(p.pools - p0) : kPoolTile;
  for (int i = threadIdx.x; i < kPoolTile * kIndexDim; i += blockDim.x) {
    const int j = i / kIndexDim, c = i % kIndexDim;
    keys[j][c] = j < npool ? p.pooled[(p0 + j) * kIndexDim + c] : 0.0f;
  }
  __syncthreads();
  const float* q = p.q + row * p.heads * kIndexDim;
  for (int i = threadIdx.x; i < p.heads * kPoolTile; i += blockDim.x) {
    const int h = i / kPoolTile, j = i % kPoolTile;
    const float* qh = q + h * kIndexDim;
    float dot = 0.0f;
#pragma unroll 8
    for (int c = 0; c < kIndexDim; ++c) dot = fmaf(__ldg(qh + c), keys[j][c], dot);
    logits[h][j] = dot;
  }
  __syncthreads();
  if (threadIdx.x < npool) {
    const int j = threadIdx.x;
    float s = 0.0f;
    for (int h = 0; h < p.heads; ++h) {
      const float l = logits[h][j];
      s += p.w[row * p.heads + h] * (l < 0.0f ? 0.0f : l);  // NaN passes through
    }
    p.scores[row * p.pools + p0 + j] = s * (1.0f / sqrtf(float(kIndexDim * p.heads)));
  }
}

struct SelectParams {
  const float* scores;
  int64_t score_stride;
  const int32_t* positions;
  int32_t* out;
  int64_t out_stride;
  int32_t* counts;
  int topk;
};

__device__ __forceinline__ bool better(float sa, int a, float sb, int b) {
  return sa > sb || (sa == sb && a < b);
}

// Grid: rows; 1024 threads. A pool is chosen when fewer than topk non-NaN pools rank above it
// under (score desc, pool asc), a total order; chosen pools are then written in pool order by a
// block-wide prefix count, and the tail follows.
__global__ void __launch_bounds__(kSelectThreads)
    select_kernel(const __grid_constant__ SelectParams p) {
  extern __shared__ float sel_smem[];
  float* s = sel_smem;                                              // [pools] scores
  int* chosen = reinterpret_cast<int*>(sel_smem + kIndexMaxPools);  // [pools] 0/1, then offsets
  __shared__ int warp_total[kSelectThreads / 32];
  const int64_t row = blockIdx.x;
  const int t = p.positions[row];
  const int pools = (t + 1) / kIndexKpool;
  int32_t* out = p.out + row * p.out_stride;
  if (pools <= p.topk) {  // dense: every token 0..t
    for (int j = threadIdx.x; j <= t; j += blockDim.x) out[j] = j;
    if (threadIdx.x == 0) p.counts[row] = t + 1;
    return;
  }
  for (int i = threadIdx.x; i < pools; i += blockDim.x) s[i] = p.scores[row * p.score_stride + i];
  __syncthreads();
  for (int i = threadIdx.x; i < pools; i += blockDim.x) {
    const float si = s[i];
    int rank = 0;
    if (!isnan(si)) {
      for (int j = 0; j < pools && rank < p.topk; ++j)
        if (!isnan(s[j]) && better(s[j], j, si, i)) ++rank;
    }
    chosen[i] = !isnan(si) && rank < p.topk ? 1 : 0;
  }
  __syncthreads();
  // Exclusive prefix count of chosen[] in pool order: each thread a contiguous run of pools.
  const int per = (pools + blockDim.x - 1) / blockDim.x;
  const int b = threadIdx.x * per, e = min(pools, b + per);
  int local = 0;
  for (int i = b; i < e; ++i) local += chosen[i];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int incl = local;
#pragma unroll
  for (int m = 1; m < 32; m <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, m);
    if (lane >= m) incl += v;
  }
  if (lane == 31) warp_total[warp] = incl;
  __syncthreads();
  int before = incl - local;
  for (int w = 0; w < warp; ++w) before += warp_total[w];
  int total = 0;
  for (int w = 0; w < kSelectThreads / 32; ++w) total += warp_total[w];
  for (int i = b; i < e; ++i)
    if (chosen[i]) {
      for (int k = 0; k < kIndexKpool; ++k) out[before * kIndexKpool + k] = i * kIndexKpool + k;
      ++before;
    }
  const int tail0 = pools * kIndexKpool;
  for (int j = tail0 + threadIdx.x; j <= t; j += blockDim.x)
    out[total * kIndexKpool + j - tail0] = j;
  if (threadIdx.x == 0) p.counts[row] = total * kIndexKpool + (t + 1 - tail0);
}

}  // namespace

void dsa_pool_keys(const float* keys, const float* gates, const float* ape, int64_t pools,
                   float* pooled, cudaStream_t stream) {
  if (pools <= 0) return;
  pool_kernel<<<unsigned(pools), kIndexDim, 0, stream>>>(keys, gates, ape, pooled);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void dsa_pool_scores(const float* q, const float* w, int64_t rows, int heads, const float* pooled,
                     int64_t pools, float* scores, cudaStream_t stream) {
  SPARKGLM_ASSERT(heads > 0 && heads <= kMaxHeads, "dsa_pool_scores: at most 64 indexer heads");
  if (rows <= 0 || pools <= 0) return;
  const dim3 grid(unsigned((pools + kPoolTile - 1) / kPoolTile), unsigned(rows));
  score_kernel<<<grid, 256, 0, stream>>>(ScoreParams{q, w, pooled, scores, pools, heads});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void dsa_select(const float* scores, int64_t score_stride, const int32_t* positions, int64_t rows,
                int topk_pools, int32_t* out, int64_t out_stride, int32_t* counts,
                cudaStream_t stream) {
  if (rows <= 0) return;
  constexpr size_t kSmem = size_t(kIndexMaxPools) * (sizeof(float) + sizeof(int));
  static bool configured = false;
  if (!configured) {
    SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(
        select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    configured = true;
  }
  select_kernel<<<unsigned(rows), kSelectThreads, kSmem, stream>>>(
      SelectParams{scores, score_stride, positions, out, out_stride, counts, topk_pools});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
