#include "engine/backend/cuda/gemm.h"

#include <algorithm>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/gemv_bf16.h"
#include "engine/backend/cuda/grouped_gemm.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr size_t kSplitPartialBytes = size_t(16) << 20;  // split-k GEMV partial sums

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

}  // namespace

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

}  // namespace

void Gemm::decode(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
                  cudaStream_t stream, GemvKernel kernel) {
  // A weight matrix of few rows gives too few blocks to stream at full bandwidth: its k is split
  // over more blocks, whose partial sums are then added in slice order. The split depends on the
  // weight's shape only (the partials' room is judged at a full piece), so a row's result does
  // not depend on the batch.
  const int splits = k % kGemvMmaK == 0 ? gemv_mma_splits(n, k) : 1;
  const bool split =
      splits > 1 &&
      size_t(splits) * size_t(kGemvMaxRows) * size_t(n) * sizeof(float) <= split_partials_.bytes();
  for (int64_t r0 = 0; r0 < m; r0 += kGemvMaxRows) {
    const int64_t rows = std::min<int64_t>(kGemvMaxRows, m - r0);
    const uint16_t* xr = x + r0 * k;
    float* yr = y + r0 * n;
    if (!split) {
      gemv_bf16(xr, rows, w, n, k, yr, stream, kernel);
      continue;
    }
    gemv_mma(xr, rows, w, n, k, yr, GemvSplit{splits, split_partials()}, kernel, stream);
  }
}

void Gemm::decode_group(const GemvPart* parts, int count, int64_t m, cudaStream_t stream) {
  SPARKGLM_ASSERT(count >= 0 && count <= kGemvGroupMax, "Gemm::decode_group: at most 4 parts");
  GemvPart cores[kGemvGroupMax];
  int n_cores = 0;
  for (int i = 0; i < count; ++i) {
    const GemvPart& p = parts[i];
    if (gemv_on_tensor_cores(std::min<int64_t>(m, kGemvMaxRows), p.k)) {  // as decode()'s pieces
      decode(p.x, m, p.w, p.n, p.k, p.y, stream);
    } else {
      cores[n_cores++] = p;
    }
  }
  // decode() takes these through gemv_bf16's CUDA-core kernel piece by piece; so does the group.
  for (int64_t r0 = 0; r0 < m && n_cores > 0; r0 += kGemvMaxRows) {
    GemvPart piece[kGemvGroupMax];
    for (int i = 0; i < n_cores; ++i) {
      piece[i] = cores[i];
      piece[i].x = cores[i].x + r0 * cores[i].k;
      piece[i].y = cores[i].y + r0 * cores[i].n;
    }
    gemv_cuda_cores_group(piece, n_cores, std::min<int64_t>(kGemvMaxRows, m - r0), stream);
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
    gemv_cuda_cores(x, m, w, n, k, y, stream);
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
