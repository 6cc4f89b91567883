#include "engine/backend/cuda/dsa_indexer.h"

#include <algorithm>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kPoolTile = 32;  // pools per score block
constexpr int kMaxHeads = 64;

// The kernels are templates over d_i with two instantiations (dsa_indexer.h): kIndexDim and
// kIndexMicroDim. The tiled score kernel is production's only (32 heads of 128).

// Thread c of the pool's d_i: sum_i a_i keys[i][c], a = softmax_i(gates[i] + ape[i]), i increasing.
// keys: the pool's kIndexKpool consecutive keys; gates: their gates.
template <int kDim>
__device__ __forceinline__ float pool_one(const float* keys, const float* gates, const float* ape) {
  float a[kIndexKpool];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kIndexKpool; ++i) {
    a[i] = gates[i] + ape[i];
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
  for (int i = 0; i < kIndexKpool; ++i) out = fmaf(a[i] * inv, keys[i * kDim + threadIdx.x], out);
  return out;
}

// Grid: pools; block: d_i threads.
template <int kDim>
__global__ void __launch_bounds__(kDim)
    pool_kernel(const float* keys, const float* gates, const float* ape, float* pooled) {
  const int64_t p = blockIdx.x;
  pooled[p * kDim + threadIdx.x] =
      pool_one<kDim>(keys + p * kIndexKpool * kDim, gates + p * kIndexKpool, ape);
}

// Grid: step rows; block: d_i threads. The pool a row completes, into its page entry.
template <int kDim>
__global__ void __launch_bounds__(kDim)
    pool_completed_kernel(const float* key_pages, const float* gate_pages, const float* ape,
                          const int32_t* positions, const int32_t* page_rows, float* pooled_pages) {
  pdl_wait();  // the step's keys and gates
  pdl_trigger();
  const int64_t r = blockIdx.x;
  if (positions[r] % kIndexKpool != kIndexKpool - 1) return;
  const int64_t last = page_rows[r], first = last - (kIndexKpool - 1);
  pooled_pages[last / kIndexKpool * kDim + threadIdx.x] =
      pool_one<kDim>(key_pages + first * kDim, gate_pages + first, ape);
}

struct ScoreParams {
  const float* q;
  const float* w;
  PooledKeys pooled;
  float* scores;
  int64_t pools;  // the row stride of scores, and the pools scored when positions is null
  int heads;
  const int32_t* positions;  // per row: it scores its visible pools only (dsa_pool_scores)
};

// Pool `pool`'s d_i values as scored row `row` sees them (PooledKeys' layout).
template <int kDim>
__device__ __forceinline__ const float* pooled_row(const PooledKeys& k, int64_t row, int64_t pool) {
  if (k.table == nullptr) return k.data + pool * kDim;
  const int32_t* table = k.table + row * k.table_stride;
  const int64_t entry =
      int64_t(table[pool / k.pools_per_block]) * k.pools_per_block + pool % k.pools_per_block;
  return k.data + entry * kDim;
}

// Grid: (ceil(pools / 32), rows); 256 threads. Logits q_h . K_p for 32 pools x all heads go
// through shared memory; then one thread per pool sums the heads in increasing order.
template <int kDim>
__global__ void __launch_bounds__(256) score_kernel(const __grid_constant__ ScoreParams p) {
  __shared__ float keys[kPoolTile][kDim + 1];
  __shared__ float logits[kMaxHeads][kPoolTile + 1];
  pdl_wait();  // q, w and the pooled keys of the kernels ahead
  pdl_trigger();
  const int64_t row = blockIdx.y, p0 = int64_t(blockIdx.x) * kPoolTile;
  int64_t pools = p.pools;
  if (p.positions != nullptr) pools = min(pools, int64_t(p.positions[row] + 1) / kIndexKpool);
  if (p0 >= pools) return;  // the whole block: a tile past what this row sees
  const int npool = pools - p0 < kPoolTile ? int(pools - p0) : kPoolTile;
  for (int i = threadIdx.x; i < kPoolTile * (kDim / 4); i += blockDim.x) {
    const int j = i / (kDim / 4), c4 = i % (kDim / 4);
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (j < npool)
      v = __ldcg(reinterpret_cast<const float4*>(pooled_row<kDim>(p.pooled, row, p0 + j)) + c4);
    keys[j][c4 * 4 + 0] = v.x;
    keys[j][c4 * 4 + 1] = v.y;
    keys[j][c4 * 4 + 2] = v.z;
    keys[j][c4 * 4 + 3] = v.w;
  }
  __syncthreads();
  const float* q = p.q + row * p.heads * kDim;
  for (int i = threadIdx.x; i < p.heads * kPoolTile; i += blockDim.x) {
    const int h = i / kPoolTile, j = i % kPoolTile;
    const float* qh = q + h * kDim;
    float dot = 0.0f;
#pragma unroll 8
    for (int c = 0; c < kDim; ++c) dot = fmaf(__ldcg(qh + c), keys[j][c], dot);
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
    p.scores[row * p.pools + p0 + j] = s * (1.0f / sqrtf(float(kDim * p.heads)));
  }
}

// Steps of four or more rows with 32 heads: a block takes kTileRows rows x 32 heads (kTileM =
// 128 (row, head) pairs) against kTileP = 128 pools with all of d_i in shared memory, as an
// outer-product SGEMM: a thread keeps 8 pairs x 8 pools of logits, each one FMA chain over c in
// increasing order from 0 (score_kernel's chain, so the logits have the same bits); the weighted
// ReLUs t = w * ReLU(l) then go through shared memory and one thread per (row, pool) adds the 32
// heads in increasing order, as score_kernel does. So a row's scores do not depend on which
// kernel ran or on the rows beside it. The FMAs do the work here: score_kernel re-reads its
// 32-pool key tile once per row and keeps one 128-long chain per thread.
constexpr int kTileRows = 4, kTileHeads = 32, kTileM = kTileRows * kTileHeads, kTileP = 128;
constexpr int kTileThreads = 256;
constexpr int kTileLd =
    kTileP + 4;  // row stride of the t buffer (16-byte aligned, fewer conflicts)
constexpr size_t kTileSmem =
    (size_t(kIndexDim) * kTileP + std::max(size_t(kIndexDim) * kTileM, size_t(kTileM) * kTileLd)) *
    sizeof(float);

__global__ void __launch_bounds__(kTileThreads)
    score_tile_kernel(const __grid_constant__ ScoreParams p, int64_t rows) {
  extern __shared__ float4 tile_smem[];
  float* kt = reinterpret_cast<float*>(tile_smem);  // [d_i][kTileP] pooled keys, c-major
  float* qt = kt + kIndexDim * kTileP;              // [d_i][kTileM] queries, c-major; later t
  const int tid = threadIdx.x;
  const int64_t r0 = int64_t(blockIdx.y) * kTileRows, p0 = int64_t(blockIdx.x) * kTileP;
  // Transposing loads: a thread reads 4 consecutive c of one (row, head) or pool and writes them
  // down a column, consecutive threads taking consecutive columns (conflict-free stores).
  for (int i = tid; i < kTileM * (kIndexDim / 4); i += kTileThreads) {
    const int m = i % kTileM, c4 = i / kTileM;
    const int64_t r = r0 + m / kTileHeads;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < rows)
      v = __ldg(
          reinterpret_cast<const float4*>(p.q + (r * kTileHeads + m % kTileHeads) * kIndexDim) +
          c4);
    qt[(c4 * 4 + 0) * kTileM + m] = v.x;
    qt[(c4 * 4 + 1) * kTileM + m] = v.y;
    qt[(c4 * 4 + 2) * kTileM + m] = v.z;
    qt[(c4 * 4 + 3) * kTileM + m] = v.w;
  }
  for (int i = tid; i < kTileP * (kIndexDim / 4); i += kTileThreads) {
    const int j = i % kTileP, c4 = i / kTileP;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (p0 + j < p.pools)
      v = __ldg(reinterpret_cast<const float4*>(pooled_row<kIndexDim>(p.pooled, 0, p0 + j)) + c4);
    kt[(c4 * 4 + 0) * kTileP + j] = v.x;
    kt[(c4 * 4 + 1) * kTileP + j] = v.y;
    kt[(c4 * 4 + 2) * kTileP + j] = v.z;
    kt[(c4 * 4 + 3) * kTileP + j] = v.w;
  }
  __syncthreads();

  // Thread (tm, tp): pairs tm*4 .. +3 and 64 + tm*4 .. +3, pools tp*4 .. +3 and 64 + tp*4 .. +3
  // (each quarter-warp reads 4 consecutive float4s: no bank conflicts).
  const int tm = tid % 16, tp = tid / 16;
  float acc[8][8];
#pragma unroll
  for (int a = 0; a < 8; ++a)
#pragma unroll
    for (int b = 0; b < 8; ++b) acc[a][b] = 0.0f;
#pragma unroll 4
  for (int c = 0; c < kIndexDim; ++c) {
    const float4 qa = *reinterpret_cast<const float4*>(qt + c * kTileM + tm * 4);
    const float4 qb = *reinterpret_cast<const float4*>(qt + c * kTileM + 64 + tm * 4);
    const float4 ka = *reinterpret_cast<const float4*>(kt + c * kTileP + tp * 4);
    const float4 kb = *reinterpret_cast<const float4*>(kt + c * kTileP + 64 + tp * 4);
    const float qv[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
    const float kv[8] = {ka.x, ka.y, ka.z, ka.w, kb.x, kb.y, kb.z, kb.w};
#pragma unroll
    for (int a = 0; a < 8; ++a)
#pragma unroll
      for (int b = 0; b < 8; ++b) acc[a][b] = fmaf(qv[a], kv[b], acc[a][b]);
  }
  __syncthreads();  // qt becomes the t buffer [kTileM][kTileLd]

  float* t = qt;
#pragma unroll
  for (int a = 0; a < 8; ++a) {
    const int m = (a < 4 ? 0 : 64) + tm * 4 + (a & 3);
    const int64_t r = r0 + m / kTileHeads;
    const float w = r < rows ? __ldg(p.w + r * kTileHeads + m % kTileHeads) : 0.0f;
#pragma unroll
    for (int b = 0; b < 8; ++b) {
      const int j = (b < 4 ? 0 : 64) + tp * 4 + (b & 3);
      const float l = acc[a][b];
      t[m * kTileLd + j] = w * (l < 0.0f ? 0.0f : l);  // NaN passes through
    }
  }
  __syncthreads();
  const float norm = 1.0f / sqrtf(float(kIndexDim * kTileHeads));
  for (int i = tid; i < kTileRows * kTileP; i += kTileThreads) {
    const int ri = i / kTileP, j = i % kTileP;
    const int64_t r = r0 + ri;
    if (r >= rows || p0 + j >= p.pools) continue;
    float s = 0.0f;
    for (int h = 0; h < kTileHeads; ++h) s += t[(ri * kTileHeads + h) * kTileLd + j];
    p.scores[r * p.pools + p0 + j] = s * norm;
  }
}

void check_dim(int dim) {
  if (dim != kIndexDim && dim != kIndexMicroDim)
    throw Error(ErrorKind::kUnsupported,
                "DSA indexer kernels: index_head_dim " + std::to_string(dim) + " (served: " +
                    std::to_string(kIndexDim) + ", " + std::to_string(kIndexMicroDim) + ")");
}

}  // namespace

void dsa_pool_keys(const float* keys, const float* gates, const float* ape, int64_t pools,
                   float* pooled, cudaStream_t stream, int dim) {
  check_dim(dim);
  if (pools <= 0) return;
  if (dim == kIndexDim) {
    pool_kernel<kIndexDim><<<unsigned(pools), kIndexDim, 0, stream>>>(keys, gates, ape, pooled);
  } else {
    pool_kernel<kIndexMicroDim>
        <<<unsigned(pools), kIndexMicroDim, 0, stream>>>(keys, gates, ape, pooled);
  }
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void dsa_pool_completed(const float* key_pages, const float* gate_pages, const float* ape,
                        const int32_t* positions, const int32_t* page_rows, int64_t rows,
                        float* pooled_pages, cudaStream_t stream, int dim) {
  check_dim(dim);
  if (rows <= 0) return;
  if (dim == kIndexDim) {
    launch_dependent(pool_completed_kernel<kIndexDim>, unsigned(rows), kIndexDim, 0, stream,
                     key_pages, gate_pages, ape, positions, page_rows, pooled_pages);
  } else {
    launch_dependent(pool_completed_kernel<kIndexMicroDim>, unsigned(rows), kIndexMicroDim, 0,
                     stream, key_pages, gate_pages, ape, positions, page_rows, pooled_pages);
  }
}

void dsa_pool_scores(const float* q, const float* w, int64_t rows, int heads,
                     const PooledKeys& pooled, int64_t pools, float* scores, cudaStream_t stream,
                     int dim, const int32_t* positions) {
  check_dim(dim);
  SPARKGLM_ASSERT(heads > 0 && heads <= kMaxHeads, "dsa_pool_scores: at most 64 indexer heads");
  SPARKGLM_ASSERT(pooled.table == nullptr || pooled.pools_per_block > 0,
                  "dsa_pool_scores: paged pools need pools_per_block");
  if (rows <= 0 || pools <= 0) return;
  const ScoreParams params{q, w, pooled, scores, pools, heads, positions};
  if (dim == kIndexMicroDim) {
    const dim3 grid(unsigned((pools + kPoolTile - 1) / kPoolTile), unsigned(rows));
    launch_dependent(score_kernel<kIndexMicroDim>, grid, 256, 0, stream, params);
  } else if (positions == nullptr && pooled.table_stride == 0 && rows >= kTileRows &&
             heads == kTileHeads) {
    static bool configured = false;
    if (!configured) {
      SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(
          score_tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kTileSmem)));
      configured = true;
    }
    const dim3 grid(unsigned((pools + kTileP - 1) / kTileP),
                    unsigned((rows + kTileRows - 1) / kTileRows));
    score_tile_kernel<<<grid, kTileThreads, kTileSmem, stream>>>(params, rows);
  } else {
    const dim3 grid(unsigned((pools + kPoolTile - 1) / kPoolTile), unsigned(rows));
    launch_dependent(score_kernel<kIndexDim>, grid, 256, 0, stream, params);
  }
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
