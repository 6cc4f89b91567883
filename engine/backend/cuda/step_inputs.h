#pragma once
// One forward step as the device reads it. The batch's sequences are reordered: one-row sequences
// first (decode rows; those attending every earlier token before those the DSA indexer selects
// for), then the longer ones (prefill chunks), each as a contiguous run of rows. Every kernel of the
// model is row-wise except attention and the KDA recurrence, so this order lets decode rows run as
// one batch (KDA, MLA decode) and each prefill chunk as one sequence.
//
// The per-row and per-sequence arrays live at fixed device addresses (what a captured CUDA graph
// reads). Each step packs only what it uses into a pinned host buffer (header, rows, block tables
// back to back), copies that prefix in one transfer and spreads it into the fixed arrays with one
// kernel: a decode step moves a few hundred bytes whatever max-seq-len is.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/model/forward_batch.h"

namespace sparkglm::cuda {

struct StepSequence {
  int first_row = 0;  // in step order
  int rows = 0;
  int start = 0;      // absolute position of the first row
  int slot = 0;       // KDA state slot
  int index = 0;      // in step order: its block table is tables + index * table_stride
};

struct StepCapacity {
  int max_rows = 0;
  int max_seqs = 0;
  int table_stride = 0;  // blocks per sequence: ceil(max_seq_len / block_size)
  int max_logit_rows = 0;
};

class StepInputs {
 public:
  StepInputs(const StepCapacity& capacity, int block_size, int topk_pools, int kpool);
  ~StepInputs();
  StepInputs(const StepInputs&) = delete;
  StepInputs& operator=(const StepInputs&) = delete;

  // Lays out `batch` (validated by the caller) and starts the copy on `stream`.
  void load(const ForwardBatch& batch, cudaStream_t stream);

  // Host view of the layout.
  int rows() const { return rows_; }
  int decode_rows() const { return decode_rows_; }  // one-row sequences, first in step order
  int dense_decode_rows() const { return dense_decode_rows_; }  // of those, the first attend all
  const std::vector<StepSequence>& seqs() const { return seqs_; }  // in step order
  const std::vector<int32_t>& positions() const { return positions_; }  // host, step order
  int max_decode_length() const { return max_decode_length_; }  // longest dense decode row + 1
  // Step-order row of each of batch.logit_rows, in the batch's order.
  const std::vector<int32_t>& logit_rows() const { return logit_rows_host_; }
  int batch_row(int step_row) const { return batch_rows_[size_t(step_row)]; }
  bool is_sparse(int position) const { return (position + 1) / kpool_ > topk_pools_; }
  const StepCapacity& capacity() const { return capacity_; }
  int block_size() const { return block_size_; }

  // Device arrays (fixed addresses).
  const int32_t* tokens() const { return array(kTokens); }
  const int32_t* page_rows() const { return array(kPageRows); }
  const int32_t* lengths() const { return array(kLengths); }  // position + 1
  const int32_t* positions_device() const { return array(kPositions); }
  const int32_t* logit_rows_device() const { return array(kLogitRows); }
  const int32_t* slots() const { return array(kRowArrays); }  // [max_seqs]
  const int32_t* tables() const { return array(kRowArrays) + capacity_.max_seqs; }

 private:
  // Fixed device arrays: these row arrays, each max_rows long; then slots [max_seqs]; then
  // tables [max_seqs, table_stride].
  enum RowArray { kTokens, kPageRows, kLengths, kPositions, kLogitRows, kRowArrays };
  const int32_t* array(int which) const { return fixed_ + int64_t(which) * capacity_.max_rows; }

  StepCapacity capacity_;
  int block_size_, topk_pools_, kpool_;
  size_t staging_words_ = 0;
  int32_t* host_ = nullptr;  // pinned staging
  DeviceBuffer staging_, fixed_buffer_;
  int32_t* fixed_ = nullptr;
  int rows_ = 0, decode_rows_ = 0, dense_decode_rows_ = 0, max_decode_length_ = 0;
  std::vector<StepSequence> seqs_;
  std::vector<int32_t> positions_, logit_rows_host_, batch_rows_;
};

}  // namespace sparkglm::cuda
