#include "engine/backend/cuda/gemm.h"

#include <algorithm>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/grouped_gemm.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kWarps = 8;        // warps per block
constexpr int kRowsPerWarp = 4;  // output rows (of W) per warp: each x chunk feeds 4 rows
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr size_t kSplitPartialBytes = size_t(16) << 20;  // split-k GEMV partial sums
constexpr int64_t kGemvTargetBlocks = 1024;  // enough blocks to keep every SM's loads in flight

void check_cublas(cublasStatus_t status, const char* call, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const std::string what =
      std::string(call) + " (cuBLAS status " + std::to_string(int(status)) + ")";
  // cuBLAS reports a poisoned context as its own failure: the sticky error behind it decides.
  if (const cudaError_t sticky = pending_sticky_error(); sticky != cudaSuccess)
    fail(sticky, what, "gemm.cu", line);
  const bool memory = status == CUBLAS_STATUS_ALLOC_FAILED;
  throw Error(memory ? ErrorKind::kCapacity : ErrorKind::kUnsupported,
              what + " failed at gemm.cu:" + std::to_string(line));
}
#define SPARKGLM_CUBLAS_CHECK(call) check_cublas((call), #call, __LINE__)

struct GemvParams {
  const uint16_t* x;  // [m, k]
  const uint16_t* w;  // [n, k]
  float* y;           // [m, n]; with splits > 1 the partials [splits, m, n]
  int64_t m, n, k;
  int splits = 1;  // k slices, one per blockIdx.y (the MMA kernel only)
};

__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
  }
}

// Grid: (ceil(n / (kWarps * kRowsPerWarp)), ceil(m / kMt)). One warp: kRowsPerWarp rows of W
// against up to kMt rows of x; lane l takes the 8-value chunks l, l+32, l+64, ...
template <int kMt>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const __grid_constant__ GemvParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t n0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  const int64_t m0 = int64_t(blockIdx.y) * kMt;
  if (n0 >= p.n) return;
  const int rows = int(p.n - n0 < kRowsPerWarp ? p.n - n0 : kRowsPerWarp);
  const int mt = int(p.m - m0 < kMt ? p.m - m0 : kMt);
  const int64_t chunks = p.k / 8;

  float acc[kRowsPerWarp][kMt];  // [rows of W, rows of x]
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int i = 0; i < kMt; ++i) acc[r][i] = 0.0f;

#pragma unroll 2
  for (int64_t c = lane; c < chunks; c += 32) {
    float wf[kRowsPerWarp][8];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      // A missing W row (n not a multiple of 4) repeats the last one; its sums are not stored.
      const int rr = r < rows ? r : rows - 1;
      unpack8(load_stream(p.w + (n0 + rr) * p.k + c * 8), wf[r]);
    }
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      if (i >= mt) break;
      float xf[8];
      unpack8(__ldg(reinterpret_cast<const uint4*>(p.x + (m0 + i) * p.k + c * 8)), xf);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][i] = fmaf(wf[r][e], xf[e], acc[r][i]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      const float s = warp_sum(acc[r][i]);
      if (lane == (r * kMt + i) % 32 && r < rows && i < mt) p.y[(m0 + i) * p.n + n0 + r] = s;
    }
}

// Tensor-core GEMV: mma.m16n8k16 (BF16 in, FP32 accumulate) with W as the 16-row A operand and
// up to 32 x rows as B columns. Block: kSplitK warps, each a contiguous quarter of k; the warps'
// partial sums are added in warp order. Lane (g = lane / 4, t = lane % 4) loads 8 consecutive k of
// W rows g and g + 8 and of x row g per 32-k block; the two MMAs of a block take k 8t..8t+3 and
// 8t+4..8t+7 at the fragment slots of logical k 2t, 2t+1, 2t+8, 2t+9 (the same permutation in A
// and B, so each dot product still covers every k once). A column's sums never involve another
// column's values, so a row's result does not depend on how many rows share the batch.
constexpr int kSplitK = 4;
constexpr int kMmaRows = 16;
constexpr int kStages = 4;                         // 32-k blocks of W loaded ahead per warp
constexpr int64_t kMmaK = 32 * kSplitK * kStages;  // k must be a multiple of this

template <int kTiles>  // ceil(m / 8) column tiles of B
__global__ void __launch_bounds__(kSplitK * 32)
    gemv_mma_kernel(const __grid_constant__ GemvParams p) {
  __shared__ float partial[kSplitK - 1][kTiles][32][4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x) * kMmaRows;
  const int64_t r0 = min(n0 + g, p.n - 1), r1 = min(n0 + g + 8, p.n - 1);  // clamped loads
  const int64_t k_slice = p.k / p.splits;  // this block's slice of k, split over its warps
  const int64_t k_per_warp = k_slice / kSplitK;
  const int64_t k_begin = blockIdx.y * k_slice + warp * k_per_warp, k_end = k_begin + k_per_warp;
  float* y = p.y + int64_t(blockIdx.y) * p.m * p.n;
  const uint16_t* w0 = p.w + r0 * p.k + t * 8;
  const uint16_t* w1 = p.w + r1 * p.k + t * 8;

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

  // kStages k blocks of W are requested before any is used: a decode GEMV is a stream of
  // weights, and only bytes in flight hide the memory latency.
  for (int64_t kb0 = k_begin; kb0 < k_end; kb0 += 32 * kStages) {
    uint4 wa[kStages], wb[kStages];
#pragma unroll
    for (int u = 0; u < kStages; ++u) {
      wa[u] = load_stream(w0 + kb0 + 32 * u);
      wb[u] = load_stream(w1 + kb0 + 32 * u);
    }
#pragma unroll
    for (int u = 0; u < kStages; ++u) {
      const int64_t kb = kb0 + 32 * u;
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        const int64_t m = j * 8 + g;
        uint4 xv = make_uint4(0, 0, 0, 0);
        if (m < p.m) xv = __ldg(reinterpret_cast<const uint4*>(p.x + m * p.k + kb + t * 8));
        mma_bf16(acc[j], wa[u].x, wb[u].x, wa[u].y, wb[u].y, xv.x, xv.y);
        mma_bf16(acc[j], wa[u].z, wb[u].z, wa[u].w, wb[u].w, xv.z, xv.w);
      }
    }
  }
  if (warp > 0) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[warp - 1][j][lane][e] = acc[j][e];
  }
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = acc[j][e];
#pragma unroll
      for (int w = 0; w < kSplitK - 1; ++w) v = v + partial[w][j][lane][e];
      const int64_t n = n0 + g + (e >= 2 ? 8 : 0);
      const int64_t m = j * 8 + t * 2 + (e & 1);
      if (n < p.n && m < p.m) y[m * p.n + n] = v;
    }
}

// y[i] = (sum over s, increasing, of partial[s][i]) * scale: the k slices of a split GEMV.
__global__ void sum_splits_kernel(const float* partial, int splits, int64_t count, float scale,
                                  float* y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    float v = partial[i];
    for (int s = 1; s < splits; ++s) v = __fadd_rn(v, partial[s * count + i]);
    y[i] = __fmul_rn(v, scale);
  }
}

template <int kTiles>
void launch_gemv_mma(const GemvParams& p, cudaStream_t stream) {
  const unsigned blocks = unsigned((p.n + kMmaRows - 1) / kMmaRows);
  gemv_mma_kernel<kTiles><<<dim3(blocks, unsigned(p.splits)), kSplitK * 32, 0, stream>>>(p);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void launch_gemv_mma_tiles(const GemvParams& p, cudaStream_t stream) {
  // The tile count only pads B; every column's MMA sequence is the same.
  if (p.m <= 8) {
    launch_gemv_mma<1>(p, stream);
  } else if (p.m <= 16) {
    launch_gemv_mma<2>(p, stream);
  } else if (p.m <= 24) {
    launch_gemv_mma<3>(p, stream);
  } else {
    launch_gemv_mma<4>(p, stream);
  }
}

template <int kMt>
void launch_gemv(const GemvParams& p, cudaStream_t stream) {
  const int64_t rows_per_block = kWarps * kRowsPerWarp;
  const dim3 grid(unsigned((p.n + rows_per_block - 1) / rows_per_block),
                  unsigned((p.m + kMt - 1) / kMt));
  gemv_kernel<kMt><<<grid, kWarps * 32, 0, stream>>>(p);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void gemv_bf16(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
               cudaStream_t stream) {
  SPARKGLM_ASSERT(k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(w) % 16 == 0,
                  "gemv_bf16: k must be a multiple of 8 and operands 16-byte aligned");
  if (m <= 0 || n <= 0) return;
  const GemvParams p{x, w, y, m, n, k};
  if (m <= kGemvMaxRows && k % kMmaK == 0) {
    launch_gemv_mma_tiles(p, stream);
    return;
  }
  // Other k: the CUDA-core kernel. The tile width only groups rows for reuse of each W chunk.
  if (m == 1) {
    launch_gemv<1>(p, stream);
  } else if (m == 2) {
    launch_gemv<2>(p, stream);
  } else if (m <= 4) {
    launch_gemv<4>(p, stream);
  } else {
    launch_gemv<8>(p, stream);
  }
}

void sum_split_partials(const float* partial, int splits, int64_t count, float scale, float* y,
                        cudaStream_t stream) {
  if (count <= 0) return;
  sum_splits_kernel<<<unsigned(std::min<int64_t>((count + 255) / 256, 4096)), 256, 0, stream>>>(
      partial, splits, count, scale, y);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

Gemm::Gemm()
    : workspace_(kWorkspaceBytes),
      split_partials_(kSplitPartialBytes),
      dense_plan_(4 * sizeof(int32_t)) {
  SPARKGLM_CUBLAS_CHECK(cublasLtCreate(&handle_));
  const cublasStatus_t made = cublasCreate(&blas_);
  if (made != CUBLAS_STATUS_SUCCESS) {
    cublasLtDestroy(handle_);  // no destructor runs after a throwing constructor
    SPARKGLM_CUBLAS_CHECK(made);
  }
}

Gemm::~Gemm() {
  if (blas_) cublasDestroy(blas_);
  if (handle_) cublasLtDestroy(handle_);
}

namespace {

// prefill()'s plan for one group of m rows: offsets {0, m}, tile offsets {0, ceil(m / tile)}.
__global__ void one_group_plan_kernel(int32_t m, int32_t tile_rows, int32_t* plan) {
  plan[0] = 0;
  plan[1] = m;
  plan[2] = 0;
  plan[3] = (m + tile_rows - 1) / tile_rows;
}

int gemv_splits(int64_t n, int64_t k) {
  const int64_t blocks = (n + kMmaRows - 1) / kMmaRows;
  int splits = 1;
  while (blocks * splits < kGemvTargetBlocks && k % (kMmaK * splits * 2) == 0) splits *= 2;
  return splits;
}

}  // namespace

void Gemm::decode(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
                  cudaStream_t stream) {
  // A weight matrix of few rows gives too few blocks to stream at full bandwidth: its k is split
  // over more blocks, whose partial sums are then added in slice order. The split depends on the
  // weight's shape only (the partials' room is judged at a full piece), so a row's result does
  // not depend on the batch.
  const int splits = k % kMmaK == 0 ? gemv_splits(n, k) : 1;
  const bool split =
      splits > 1 &&
      size_t(splits) * size_t(kGemvMaxRows) * size_t(n) * sizeof(float) <= split_partials_.bytes();
  for (int64_t r0 = 0; r0 < m; r0 += kGemvMaxRows) {
    const int64_t rows = std::min<int64_t>(kGemvMaxRows, m - r0);
    const uint16_t* xr = x + r0 * k;
    float* yr = y + r0 * n;
    if (!split) {
      gemv_bf16(xr, rows, w, n, k, yr, stream);
      continue;
    }
    GemvParams p{xr, w, static_cast<float*>(split_partials_.data()), rows, n, k, splits};
    launch_gemv_mma_tiles(p, stream);
    sum_split_partials(p.y, splits, rows * n, 1.0f, yr, stream);
  }
}

void Gemm::prefill(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
                   cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  SPARKGLM_ASSERT(k % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(w) % 16 == 0 && m <= int64_t(INT32_MAX),
                  "Gemm::prefill: k must be a multiple of 8, operands 16-byte aligned");
  if (n % 8 != 0) {
    // Too few columns for the tile GEMM (the indexer's one-column pooling gate): the CUDA-core
    // GEMV, whose per-element chain is the same for every m.
    launch_gemv<8>(GemvParams{x, w, y, m, n, k}, stream);
    return;
  }
  // 128-row tiles for long pieces, 64 for short ones; a row's bits are the same with either.
  const int tile_rows = m >= 512 ? 128 : 64;
  int32_t* plan = static_cast<int32_t*>(dense_plan_.data());
  one_group_plan_kernel<<<1, 1, 0, stream>>>(int32_t(m), tile_rows, plan);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  GroupedGemmArgs g;
  g.groups = 1;
  g.tile_rows = tile_rows;
  g.offsets = plan;
  g.tile_offsets = plan + 2;
  g.max_rows = m;
  g.a = x;
  g.w_count = 0;  // the one group reads w_last
  g.w_last = w;
  g.n = n;
  g.k = k;
  grouped_gemm(g, y, stream);
}

void Gemm::step(const uint16_t* x, int64_t decode_rows, int64_t m, const uint16_t* w, int64_t n,
                int64_t k, float* y, cudaStream_t stream) {
  SPARKGLM_ASSERT(decode_rows >= 0 && decode_rows <= m, "Gemm::step: decode rows outside [0, m]");
  decode(x, decode_rows, w, n, k, y, stream);
  prefill(x + decode_rows * k, m - decode_rows, w, n, k, y + decode_rows * n, stream);
}

// Column-major view: D [n, m] (= y row-major [m, n]) = op(A) B with A = W viewed as [k, n]
// transposed, B = x viewed as [k, m].
void Gemm::cublaslt(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
                    cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  SPARKGLM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans = CUBLAS_OP_T, no_trans = CUBLAS_OP_N;
  SPARKGLM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)));
  SPARKGLM_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &no_trans, sizeof(no_trans)));
  SPARKGLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, uint64_t(k), uint64_t(n), k));
  SPARKGLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, uint64_t(k), uint64_t(m), k));
  SPARKGLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, uint64_t(n), uint64_t(m), n));

  const auto key = std::make_tuple(m, n, k);
  auto it = algos_.find(key);
  if (it == algos_.end()) {
    cublasLtMatmulPreference_t pref = nullptr;
    SPARKGLM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = workspace_.bytes();
    SPARKGLM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    SPARKGLM_CUBLAS_CHECK(
        cublasLtMatmulAlgoGetHeuristic(handle_, op, a, b, d, d, pref, 1, &result, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0)
      throw Error(ErrorKind::kUnsupported,
                  "cuBLASLt has no algorithm for a BF16 GEMM of m=" + std::to_string(m) +
                      " n=" + std::to_string(n) + " k=" + std::to_string(k));
    it = algos_.emplace(key, result.algo).first;
  }
  const float alpha = 1.0f, beta = 0.0f;
  SPARKGLM_CUBLAS_CHECK(cublasLtMatmul(handle_, op, &alpha, w, a, x, b, &beta, y, d, y, d,
                                       &it->second, workspace_.data(), workspace_.bytes(), stream));
  cublasLtMatrixLayoutDestroy(a);
  cublasLtMatrixLayoutDestroy(b);
  cublasLtMatrixLayoutDestroy(d);
  cublasLtMatmulDescDestroy(op);
}

// Column-major view of batch b: D = Y_b^T [n, m] (ld y_ld) = op(A) B with B = X_b^T [k, m]
// (ld x_ld). W_b [n, k] row-major is [k, n] column-major, so op(A) = A^T; W_b [k, n] row-major
// is [n, k] column-major already, op(A) = A.
void Gemm::batched(const BatchedGemmArgs& a, cudaStream_t stream) {
  if (a.m <= 0 || a.n <= 0 || a.batches <= 0) return;
  constexpr int64_t kIntMax = 2147483647;
  SPARKGLM_ASSERT(a.k > 0 && a.x && a.w && a.y && a.x_ld >= a.k && a.y_ld >= a.n &&
                      a.w_ld >= (a.w_kn ? a.n : a.k) &&
                      std::max({a.m, a.n, a.k, a.x_ld, a.w_ld, a.y_ld}) <= kIntMax,
                  "Gemm::batched: row strides must cover a row, sizes fit cuBLAS's int");
  SPARKGLM_CUBLAS_CHECK(cublasSetStream(blas_, stream));
  // cublasSetStream puts cuBLAS's own workspace pool back, so ours goes in after it.
  SPARKGLM_CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_.data(), workspace_.bytes()));
  const float alpha = 1.0f, beta = 0.0f;
  SPARKGLM_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      blas_, a.w_kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, int(a.n), int(a.m), int(a.k), &alpha,
      a.w, CUDA_R_16BF, int(a.w_ld), a.w_batch, a.x, CUDA_R_16BF, int(a.x_ld), a.x_batch, &beta,
      a.y, a.y_bf16 ? CUDA_R_16BF : CUDA_R_32F, int(a.y_ld), a.y_batch, a.batches,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace sparkglm::cuda
