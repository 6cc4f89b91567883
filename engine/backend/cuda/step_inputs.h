#pragma once
// One forward step's inputs on the device, in the order of engine/backend/step_layout.h. The
// per-row and per-sequence arrays live at fixed device addresses (what a captured CUDA graph
// reads). Each step packs only what it uses into a pinned host buffer, copies it in one transfer
// and spreads it into the fixed arrays with one kernel: a decode step moves a few hundred bytes
// whatever max-seq-len is. A verify step's slices, and words a caller adds (upload's tail: the
// draft chain's map), come in the same transfer.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/step_layout.h"
#include "engine/model/forward_batch.h"

namespace sparkglm::cuda {

class StepInputs {
 public:
  StepInputs(const StepCapacity& capacity, int block_size, int topk_pools, int kpool);
  ~StepInputs();
  StepInputs(const StepInputs&) = delete;
  StepInputs& operator=(const StepInputs&) = delete;

  // Lays out `batch` (validated by the caller) and starts the copy on `stream`: build, then
  // upload with no tail.
  void load(const ForwardBatch& batch, cudaStream_t stream);
  // The two halves: build lays the step out on the host (the views below are then valid), upload
  // starts its one transfer and spread on `stream`, with `tail.count` (at most kStepTailWords)
  // host words that the spread writes to the device words `tail.to`.
  struct Tail {
    const int32_t* words = nullptr;
    int count = 0;
    int32_t* to = nullptr;
  };
  static constexpr int kStepTailWords = 256;
  void build(const ForwardBatch& batch);
  void upload(cudaStream_t stream, const Tail& tail);

  // Host view of the layout.
  const StepLayout& layout() const { return layout_; }
  int rows() const { return layout_.rows(); }
  int decode_rows() const { return layout_.decode_rows(); }
  int dense_decode_rows() const { return layout_.dense_decode_rows(); }
  const std::vector<StepSequence>& seqs() const { return layout_.seqs(); }
  const std::vector<int32_t>& positions() const { return layout_.positions(); }
  int max_decode_length() const { return layout_.max_decode_length(); }
  const std::vector<int32_t>& logit_rows() const { return layout_.logit_rows(); }
  int batch_row(int step_row) const { return layout_.batch_row(step_row); }
  bool is_sparse(int position) const { return layout_.is_sparse(position); }

  // Device arrays (fixed addresses).
  const int32_t* tokens() const { return array(kTokens); }
  int32_t* tokens_to_patch() { return array(kTokens); }
  // The row arrays a kernel may move rows in (draft_chain.h: chained draft rows take their
  // positions on the device); lengths must stay positions + 1, page rows the tables' entry.
  struct Patch {
    int32_t *tokens, *page_rows, *lengths, *positions;
  };
  Patch rows_to_patch() {
    return {array(kTokens), array(kPageRows), array(kLengths), array(kPositions)};
  }
  const int32_t* page_rows() const { return array(kPageRows); }
  const int32_t* lengths() const { return array(kLengths); }  // position + 1
  const int32_t* positions_device() const { return array(kPositions); }
  const int32_t* logit_rows_device() const { return array(kLogitRows); }
  const int32_t* slots() const { return array(kRowArrays); }  // [max_seqs]
  const int32_t* tables() const { return array(kRowArrays) + layout_.capacity().max_seqs; }
  // Per sequence (decode row i is sequence i): the KDA record after / before it, -1 for none.
  const int32_t* record_after() const {
    const StepCapacity& c = layout_.capacity();
    return tables() + int64_t(c.max_seqs) * c.table_stride;
  }
  const int32_t* record_before() const { return record_after() + layout_.capacity().max_seqs; }
  // A verify step's slices (kda.h: KdaBatch::slice_rows): the decode rows grouped by state slot,
  // each slice's rows in position order. Host counts, device words.
  int slices() const { return slices_; }
  int longest_slice() const { return longest_slice_; }
  const int32_t* slice_slots() const { return slice_words_; }
  const int32_t* slice_first() const { return slice_words_ + layout_.capacity().max_seqs; }
  const int32_t* slice_rows() const { return slice_first() + layout_.capacity().max_seqs + 1; }

 private:
  // Fixed device arrays: these row arrays, each max_rows long; then slots [max_seqs]; then
  // tables [max_seqs, table_stride]; then record_after [max_seqs] and record_before [max_seqs].
  enum RowArray { kTokens, kPageRows, kLengths, kPositions, kLogitRows, kRowArrays };
  const int32_t* array(int which) const {
    return fixed_ + int64_t(which) * layout_.capacity().max_rows;
  }
  int32_t* array(int which) { return fixed_ + int64_t(which) * layout_.capacity().max_rows; }

  // Groups a speculative step's decode rows into slices (slice_*), their words written at
  // `slice_host`; returns how many words to copy (0 for a step that is not speculative).
  size_t pack_slices(int32_t* slice_host);
  size_t slice_words() const;  // slots [max_seqs], first [max_seqs + 1], rows [max_seqs]

  StepLayout layout_;
  // Pinned staging: the layout's words, the slices' and a tail (kStepTailWords at most).
  int32_t* host_ = nullptr;
  size_t layout_words_ = 0, slice_count_ = 0;  // of the step built last
  cudaEvent_t copied_ = nullptr;               // the last copy out of host_ has run
  DeviceBuffer staging_, fixed_buffer_;
  int32_t* fixed_ = nullptr;
  int slices_ = 0, longest_slice_ = 0;
  DeviceBuffer slice_buffer_;
  int32_t* slice_words_ = nullptr;
};

}  // namespace sparkglm::cuda
