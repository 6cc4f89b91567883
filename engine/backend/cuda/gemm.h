#pragma once
// y = x W^T with BF16 operands and FP32 accumulation and output: every projection of the model.
//
// Two paths, chosen by the number of rows M:
//   M <= kGemvMaxRows (decode): gemv_bf16, a weight-streaming kernel on tensor cores
//     (mma.m16n8k16, FP32 accumulate): W rows are the MMA's 16-row operand, x rows its columns,
//     k split over 4 warps whose partial sums are added in warp order. A column's sums never use
//     another column's values and the k order is fixed, so a decode row's result does not depend
//     on the batch it shares (bit for bit). k not a multiple of 512 falls back to a CUDA-core
//     kernel with the same property.
//   M >  kGemvMaxRows (prefill): cuBLASLt (tensor cores, FP32 accumulate); no batch-invariance
//     promise, prefill rows are checked against the CPU within tolerance.
// Gemm::batched is the strided-batched product of cuBLAS (MLA's per-head products in prefill
// passes), with the same lack of a batch-invariance promise.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "engine/backend/cuda/device_buffer.h"

namespace sparkglm::cuda {

inline constexpr int kGemvMaxRows = 32;

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
               cudaStream_t stream);

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // The model's projection: gemv_bf16 for m <= kGemvMaxRows (its k split over more blocks, in
  // a fixed order, when the weight has few rows), else cuBLASLt.
  void linear(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
              cudaStream_t stream);
  // cuBLASLt whatever m (the peer the G1 table sets beside gemv_bf16). y: [m, n] FP32.
  void cublaslt(const uint16_t* x, int64_t m, const uint16_t* w, int64_t n, int64_t k, float* y,
                cudaStream_t stream);
  // One cublasGemmStridedBatchedEx (BatchedGemmArgs). It shares the cuBLASLt workspace, so like
  // every call of this class it must stay on one stream at a time.
  void batched(const BatchedGemmArgs& args, cudaStream_t stream);

 private:
  cublasLtHandle_t handle_ = nullptr;
  cublasHandle_t blas_ = nullptr;  // cuBLAS proper, for the strided-batched product
  DeviceBuffer workspace_;
  DeviceBuffer split_partials_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, cublasLtMatmulAlgo_t> algos_;  // by (m, n, k)
};

}  // namespace sparkglm::cuda
