#include <algorithm>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/token_mask.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 256;

// grid: (blocks over the vocabulary, rows). One thread per 32-token word: it reads the word once
// and writes -inf into the logits of its cleared bits.
__global__ void apply_token_masks_kernel(float* logits, int64_t vocab, const int32_t* mask_row,
                                         const uint32_t* masks, int32_t words) {
  const int64_t row = blockIdx.y;
  const int32_t m = mask_row[row];
  if (m < 0) return;
  const uint32_t* bits = masks + int64_t(m) * words;
  float* x = logits + row * vocab;
  for (int64_t w = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; w < words;
       w += int64_t(gridDim.x) * blockDim.x) {
    const uint32_t allowed = bits[w];
    if (allowed == 0xffffffffu) continue;
    const int64_t base = w * 32;
    for (int b = 0; b < 32 && base + b < vocab; ++b)
      if (!(allowed >> b & 1u)) x[base + b] = -INFINITY;
  }
}

}  // namespace

void apply_token_masks(float* logits, int64_t rows, int64_t vocab, const int32_t* mask_row,
                       const uint32_t* masks, int32_t words, cudaStream_t stream) {
  if (rows <= 0) return;
  SPARKGLM_ASSERT(int64_t(words) * 32 >= vocab, "apply_token_masks: fewer mask bits than tokens");
  SPARKGLM_ASSERT(rows <= 65535, "apply_token_masks: rows beyond the grid's y dimension");
  const int blocks = int(std::min<int64_t>((words + kThreads - 1) / kThreads, 1024));
  apply_token_masks_kernel<<<dim3(unsigned(std::max(blocks, 1)), unsigned(rows)), kThreads, 0,
                             stream>>>(logits, vocab, mask_row, masks, words);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

TokenMaskUpload::~TokenMaskUpload() {
  cudaFreeHost(pinned_masks_);
  cudaFreeHost(pinned_rows_);
  if (copied_) cudaEventDestroy(copied_);
}

void TokenMaskUpload::reserve(size_t mask_words, size_t rows) {
  if (!copied_) SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
  // The previous copy must have read the pinned buffers before they are freed or rewritten.
  SPARKGLM_CUDA_CHECK(cudaEventSynchronize(copied_));
  if (mask_words > mask_capacity_) {
    cudaFreeHost(pinned_masks_);
    pinned_masks_ = nullptr;
    SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_masks_, mask_words * sizeof(uint32_t)));
    masks_ = DeviceBuffer(mask_words * sizeof(uint32_t));
    mask_capacity_ = mask_words;
  }
  if (rows > row_capacity_) {
    cudaFreeHost(pinned_rows_);
    pinned_rows_ = nullptr;
    SPARKGLM_CUDA_CHECK(cudaMallocHost(&pinned_rows_, rows * sizeof(int32_t)));
    rows_ = DeviceBuffer(rows * sizeof(int32_t));
    row_capacity_ = rows;
  }
}

void TokenMaskUpload::upload(const StepSampling& sampling, int64_t logit_rows,
                             cudaStream_t stream) {
  const int32_t mask_rows = sampling.mask_rows();
  active_ = sampling.fill_masks && mask_rows > 0 && logit_rows > 0;
  if (!active_) return;
  words_ = sampling.mask_words;
  const size_t mask_words = size_t(mask_rows) * size_t(words_);
  reserve(mask_words, size_t(logit_rows));
  // Host work while the device runs the step's layers (launched before this call).
  sampling.fill_masks(pinned_masks_);
  for (int64_t r = 0; r < logit_rows; ++r)
    pinned_rows_[r] = r < int64_t(sampling.mask_row.size()) ? sampling.mask_row[size_t(r)] : -1;
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(masks_.data(), pinned_masks_, mask_words * sizeof(uint32_t),
                                      cudaMemcpyHostToDevice, stream));
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(rows_.data(), pinned_rows_,
                                      size_t(logit_rows) * sizeof(int32_t), cudaMemcpyHostToDevice,
                                      stream));
  SPARKGLM_CUDA_CHECK(cudaEventRecord(copied_, stream));
}

void TokenMaskUpload::apply(float* logits, int64_t row0, int64_t rows, int64_t vocab,
                            cudaStream_t stream) const {
  if (!active_) return;
  apply_token_masks(logits, rows, vocab, static_cast<const int32_t*>(rows_.data()) + row0,
                    static_cast<const uint32_t*>(masks_.data()), words_, stream);
}

}  // namespace sparkglm::cuda
