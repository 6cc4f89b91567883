#include "engine/backend/cuda/projection.h"

#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/stored_weight_value.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;

[[noreturn]] void refuse(const char* what, const std::string& why) {
  throw Error(ErrorKind::kUnsupported, std::string("projection ") + what + ": " + why);
}

int64_t data_bytes(const Linear& w) {
  if (w.format == LinearFormat::kNvfp4) return w.rows * w.cols / 2;
  if (w.format == LinearFormat::kDense) return w.rows * w.cols * dtype_size(w.dtype);
  return w.rows * w.cols;  // E4M3
}

int64_t scale_bytes(const Linear& w) {
  if (w.format == LinearFormat::kNvfp4) return w.rows * (w.cols / 16);
  if (w.format == LinearFormat::kMxfp8) return w.rows * (w.cols / 32);
  return 0;
}

struct DequantArgs {
  QuantizedWeight w;
  uint16_t* out;  // [rows, cols] BF16
};

// One thread per weight: the CPU's FP32 value (stored_weight_value.cuh), then BF16 round to
// nearest even.
__global__ void dequantize_kernel(const __grid_constant__ DequantArgs a) {
  const QuantizedWeight& w = a.w;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < w.rows * w.cols;
       i += int64_t(gridDim.x) * blockDim.x)
    a.out[i] = f32_to_bf16_bits(stored_weight_value(w, i / w.cols, i % w.cols));
}

}  // namespace

QuantizedWeight quantized_weight(const Linear& w) {
  if (!w.quantized())
    throw Error(ErrorKind::kInvalidArgument, "quantized_weight: the Linear [" +
                                                 std::to_string(w.rows) + ", " +
                                                 std::to_string(w.cols) + "] is dense");
  QuantizedWeight q;
  q.format = w.format == LinearFormat::kNvfp4   ? QuantFormat::kNvfp4
             : w.format == LinearFormat::kMxfp8 ? QuantFormat::kMxfp8
                                                : QuantFormat::kFp8Block;
  q.rows = w.rows;
  q.cols = w.cols;
  q.data = static_cast<const uint8_t*>(w.data);
  q.scale = w.scale;
  q.scale_inv = w.scale_inv;
  q.global_scale = w.global_scale;
  return q;
}

Linear fused(std::initializer_list<const Linear*> parts, const char* what) {
  const Linear& first = **parts.begin();
  Linear out = first;
  out.rows = 0;
  const char* next_data = static_cast<const char*>(first.data);
  const uint8_t* next_scale = first.scale;
  const float* next_scale_inv = first.scale_inv;
  size_t i = 0;
  for (const Linear* p : parts) {
    ++i;
    if (p->format != first.format || p->dtype != first.dtype || p->cols != first.cols)
      refuse(what, "its parts differ in format or columns");
    if (p->format == LinearFormat::kNvfp4 && p->global_scale != first.global_scale)
      refuse(what, "NVFP4 parts with different global scales cannot share one product");
    if (static_cast<const char*>(p->data) != next_data)
      refuse(what, "part " + std::to_string(i) + "'s elements do not follow the previous part's");
    if (p->scale != next_scale)
      refuse(what, "part " + std::to_string(i) + "'s scales do not follow the previous part's");
    if (p->format == LinearFormat::kFp8Block) {
      if (p->scale_inv != next_scale_inv)
        refuse(what, "part " + std::to_string(i) + "'s scale_inv does not follow");
      if (i < parts.size() && p->rows % 128 != 0)
        refuse(what, "FP8 block parts before the last need rows % 128 == 0");
      next_scale_inv = p->scale_inv + ((p->rows + 127) / 128) * ((p->cols + 127) / 128);
    }
    next_data += data_bytes(*p);
    if (p->scale) next_scale = p->scale + scale_bytes(*p);
    out.rows += p->rows;
  }
  return out;
}

void dequantize_to_bf16(const Linear& w, uint16_t* out, cudaStream_t stream) {
  const DequantArgs a{quantized_weight(w), out};
  const int64_t n = w.rows * w.cols;
  if (n == 0) return;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  dequantize_kernel<<<int(blocks < 65536 ? blocks : 65536), kThreads, 0, stream>>>(a);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void project_decode(Gemm& gemm, const Linear& w, const uint16_t* x, int64_t m, float* y,
                    cudaStream_t stream) {
  if (!w.quantized()) {
    gemm.decode(x, m, w.bf16(), w.rows, w.cols, y, stream);
    return;
  }
  const QuantizedWeight q = quantized_weight(w);
  // Gemm::decode's split-k room, free between its own calls on this stream: a weight of few rows
  // splits k over blocks there (quantized_linear.h).
  const GemvPartials partials{gemm.split_partials(), gemm.split_partial_floats()};
  for (int64_t r0 = 0; r0 < m; r0 += kQuantGemvMaxRows) {
    const int64_t rows = m - r0 < kQuantGemvMaxRows ? m - r0 : kQuantGemvMaxRows;
    quantized_gemv(x + r0 * w.cols, rows, q, y + r0 * w.rows, stream, QuantKernel::kCurrent,
                   partials);
  }
}

void project_prefill(Gemm& gemm, const DequantWorkspace& ws, const Linear& w, const uint16_t* x,
                     int64_t m, float* y, cudaStream_t stream) {
  if (m == 0) return;
  if (!w.quantized()) {
    gemm.prefill(x, m, w.bf16(), w.rows, w.cols, y, stream);
    return;
  }
  SPARKGLM_ASSERT(w.rows * w.cols <= ws.elems,
                  "the dequantization workspace is smaller than a projection it serves");
  dequantize_to_bf16(w, ws.data, stream);
  gemm.prefill(x, m, ws.data, w.rows, w.cols, y, stream);
}

void project_step(Gemm& gemm, const DequantWorkspace& ws, const Linear& w, const uint16_t* x,
                  int64_t decode_rows, int64_t m, float* y, cudaStream_t stream) {
  if (!w.quantized()) {
    gemm.step(x, decode_rows, m, w.bf16(), w.rows, w.cols, y, stream);
    return;
  }
  project_decode(gemm, w, x, decode_rows, y, stream);
  project_prefill(gemm, ws, w, x + decode_rows * w.cols, m - decode_rows, y + decode_rows * w.rows,
                  stream);
}

void project_decode_group(Gemm& gemm, std::initializer_list<ProjectionPart> parts, int64_t m,
                          cudaStream_t stream) {
  SPARKGLM_ASSERT(parts.size() <= size_t(kGemvGroupMax), "project_decode_group: at most 4 parts");
  GemvPart dense[kGemvGroupMax];
  int count = 0;
  for (const ProjectionPart& p : parts) {
    if (p.w->quantized()) {
      project_decode(gemm, *p.w, p.x, m, p.y, stream);
    } else {
      dense[count++] = GemvPart{p.x, p.w->bf16(), p.w->rows, p.w->cols, p.y};
    }
  }
  gemm.decode_group(dense, count, m, stream);
}

void project_step_group(Gemm& gemm, const DequantWorkspace& ws,
                        std::initializer_list<ProjectionPart> parts, int64_t decode_rows, int64_t m,
                        cudaStream_t stream) {
  SPARKGLM_ASSERT(decode_rows >= 0 && decode_rows <= m,
                  "project_step_group: decode rows outside [0, m]");
  project_decode_group(gemm, parts, decode_rows, stream);
  for (const ProjectionPart& p : parts)
    project_prefill(gemm, ws, *p.w, p.x + decode_rows * p.w->cols, m - decode_rows,
                    p.y + decode_rows * p.w->rows, stream);
}

}  // namespace sparkglm::cuda
