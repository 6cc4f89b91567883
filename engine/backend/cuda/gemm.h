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
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "engine/backend/cuda/device_buffer.h"

namespace sparkglm::cuda {

inline constexpr int kGemvMaxRows = 32;

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

 private:
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer split_partials_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, cublasLtMatmulAlgo_t> algos_;  // by (m, n, k)
};

}  // namespace sparkglm::cuda
