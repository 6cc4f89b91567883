#pragma once
// Grammar masks on the device (structured output, text/grammar): before a step's picks, the logits
// of every token a row's grammar forbids become -inf, so the device's greedy pick and seeded draw
// choose among the allowed tokens exactly as the host sampler does with the same mask.
//
// TokenMaskUpload carries a step's masks to the device: StepSampling::fill_masks writes them into
// pinned memory, called after the step's forward has been launched, so the host computes the masks
// while the device runs the layers; one asynchronous copy moves them ([mask rows, words] uint32 and
// [logit rows] row indices) and apply_token_masks runs on the head's logits before the picks.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/step_sampling.h"

namespace sparkglm::cuda {

// logits: [rows, vocab] FP32; mask_row: [rows] on the device, the row's mask index or -1 (left as
// it is); masks: [mask rows, words] bits on the device, bit id % 32 of word id / 32 set: allowed.
void apply_token_masks(float* logits, int64_t rows, int64_t vocab, const int32_t* mask_row,
                       const uint32_t* masks, int32_t words, cudaStream_t stream);

class TokenMaskUpload {
 public:
  TokenMaskUpload() = default;
  ~TokenMaskUpload();
  TokenMaskUpload(const TokenMaskUpload&) = delete;
  TokenMaskUpload& operator=(const TokenMaskUpload&) = delete;

  // When `sampling` masks some of its `logit_rows` rows: fills the masks on the host (fill_masks)
  // and queues their copy on `stream`; active() says whether this step has masks.
  void upload(const StepSampling& sampling, int64_t logit_rows, cudaStream_t stream);
  bool active() const { return active_; }
  // Applies this step's masks to logit rows [row0, row0 + rows) held in `logits` [rows, vocab].
  void apply(float* logits, int64_t row0, int64_t rows, int64_t vocab, cudaStream_t stream) const;

 private:
  void reserve(size_t mask_words, size_t rows);

  bool active_ = false;
  int32_t words_ = 0;
  DeviceBuffer masks_, rows_;         // uint32 [mask rows, words], int32 [logit rows]
  uint32_t* pinned_masks_ = nullptr;  // the same, on the host
  int32_t* pinned_rows_ = nullptr;
  size_t mask_capacity_ = 0, row_capacity_ = 0;  // elements
  cudaEvent_t copied_ = nullptr;                 // the last copy has read the pinned buffers
};

}  // namespace sparkglm::cuda
