#pragma once
// y = x W^T with BF16 operands and FP32 accumulation and output: every projection of the model.
//
// Batch invariance: a row's result never depends on which rows share its product, how many there
// are, or how a prompt was cut into steps. The path is chosen by what a row is, never by how many
// rows there are:
//   decode rows (and the LM head's logit rows): gemv_bf16, a weight-streaming kernel on tensor
//     cores (mma.m16n8k16, FP32 accumulate) over pieces of at most kGemvMaxRows rows: W rows are
//     the MMA's 16-row operand, x rows its columns, k split over 4 warps whose partial sums are
//     added in warp order (and over more blocks, in slice order, for weights of few rows: a split
//     fixed by the weight's shape). A column's sums never use another column's values.
//   prefill rows: a fixed-tile tensor-core GEMM (grouped_gemm with one group): each output is one
//     row's dot product summed k16 step after k16 step in k order, whatever the tile size or the
//     row's place in its tile; no split-K. Weights of n % 8 != 0 columns (the indexer's pooling
//     gate) take the CUDA-core GEMV kernel, whose chain does not depend on m either.
// A token is a decode row or a prefill row by what it is (SequenceSlice::decode), so each of its
// products always takes the same path. cuBLASLt stays as the G1 peer: it picks kernels by M.
// Gemm::batched is the strided-batched product of cuBLAS (MLA's per-head products in prefill
// passes): its callers launch it at one fixed M, so one kernel serves every pass.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "engine/backend/cuda/device_buffer.h"

namespace sparkglm::cuda {

inline constexpr int kGemvMaxRows = 32;

// One product of a grouped decode GEMV (Gemm::decode_group): y [m, n] = x [m, k] W [n, k]^T, its
// own operands; the group shares m.
struct GemvPart {
  const uint16_t* x = nullptr;
  const uint16_t* w = nullptr;
  int64_t n = 0, k = 0;
  float* y = nullptr;
};
inline constexpr int kGemvGroupMax = 4;

// The decode GEMV's two kernels, which give the same bits (gemv_bf16.h): kStream through shared
// memory, kRegisters (the 2026-12-02 kernel) straight into registers; kAuto, the engine's, takes
// kStream for weights of kGemvStreamBytes or more and kRegisters below.
enum class GemvKernel { kAuto, kStream, kRegisters };
inline constexpr int64_t kGemvStreamBytes = int64_t(32) << 20;

// For b < batches: Y_b = X_b W_b^T, or X_b W_b with w_kn, on tensor cores (BF16 operands, FP32
// accumulation). Row-major views, element strides: X_b [m, k] at x + b * x_batch, rows x_ld
// apart; W_b [n, k] (nn.Linear layout), or [k, n] with w_kn, at w + b * w_batch, rows w_ld apart;
// Y_b [m, n] at y + b * y_batch, rows y_ld apart, FP32, or BF16 bits with y_bf16. Batches may
// interleave (x_batch < x_ld) as long as no element of Y belongs to two of them.
struct BatchedGemmArgs {
  int64_t m = 0, n = 0, k = 0;
  int batches = 0;
  const uint16_t* x = nullptr;
  int64_t x_ld = 0, x_batch = 0;
  const uint16_t* w = nullptr;
  int64_t w_ld = 0, w_batch = 0;
  bool w_kn = false;
  void* y = nullptr;
  int64_t y_ld = 0, y_batch = 0;
  bool y_bf16 = false;
};

// x: [m, k] BF16 bits; w: [n, k] BF16 bits (nn.Linear layout); y: [m, n] FP32.
// k must be a multiple of 8 and x, w 16-byte aligned.
void gemv_bf16(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
               cudaStream_t stream, GemvKernel kernel = GemvKernel::kAuto);

// y[i] = (partial[0][i] + partial[1][i] + ... + partial[splits - 1][i]) * scale, added in slice
// order: the k slices of a GEMV split over blocks (partial: [splits][count] FP32).
void sum_split_partials(const float* partial, int splits, int64_t count, float scale, float* y,
                        cudaStream_t stream);

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Decode rows (any m, in pieces of kGemvMaxRows): the weight-streaming GEMV. w must be a model
  // weight, written by no kernel: its first stage is read before the PDL wait (pdl.cuh).
  void decode(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
              cudaStream_t stream, GemvKernel kernel = GemvKernel::kAuto);
  // decode() of each of `count` <= kGemvGroupMax parts, the same bits, but the parts whose k is
  // not a multiple of kGemvMmaK (the CUDA-core GEMV's: tinyglm-micro's projections of its 256-wide
  // hidden state, KDA's low-rank second halves at every width) in one launch per piece of
  // kGemvMaxRows rows, since such small products cost their launch more than their bytes. Parts
  // on the tensor-core path are decode() each.
  void decode_group(const GemvPart* parts, int count, int64_t m, cudaStream_t stream);
  // Prefill rows (any m, one row included): the fixed-tile GEMM.
  void prefill(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
               cudaStream_t stream);
  // A step's rows, decode rows first (the runner's step order): rows [0, decode_rows) through
  // decode(), rows [decode_rows, m) through prefill().
  void step(const uint16_t* x, int64_t decode_rows, int64_t m, const uint16_t* w, int64_t n,
            int64_t k, float* y, cudaStream_t stream);
  // cuBLASLt whatever m (the peer the G1 table sets beside gemv_bf16). y: [m, n] FP32.
  void cublaslt(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
                cudaStream_t stream);
  // One cublasGemmStridedBatchedEx (BatchedGemmArgs). It shares the cuBLASLt workspace, so like
  // every call of this class it must stay on one stream at a time.
  void batched(const BatchedGemmArgs& args, cudaStream_t stream);
  // The room decode() keeps for the partial sums of a GEMV split over blocks, lent to the
  // quantized GEMV (projection.cu) on the same stream.
  float* split_partials() const { return static_cast<float*>(split_partials_.data()); }
  size_t split_partial_floats() const { return split_partials_.bytes() / sizeof(float); }

 private:
  cublasLtHandle_t handle_ = nullptr;
  cublasHandle_t blas_ = nullptr;  // cuBLAS proper, for the strided-batched product
  DeviceBuffer workspace_;
  DeviceBuffer split_partials_;
  DeviceBuffer dense_plan_;  // int32 [4]: prefill()'s one-group offsets and tile offsets
  std::map<std::tuple<int64_t, int64_t, int64_t>, cublasLtMatmulAlgo_t> algos_;  // by (m, n, k)
};

}  // namespace sparkglm::cuda
