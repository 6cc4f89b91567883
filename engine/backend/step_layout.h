#pragma once
// One forward step in the order the CUDA runner computes it, and the packed words that carry it to
// the device. The batch's sequences are reordered: decode rows first (SequenceSlice::decode; those
// attending every earlier token before those the DSA indexer selects for), then the prompt pieces
// (prefill chunks, one-row pieces included), each a contiguous run of rows. Every kernel of the
// model is row-wise except attention and the KDA recurrence, so this order lets the decode rows run
// as one batch and each prefill chunk as one sequence. Host-only code, so the layout is tested
// without a GPU.
//
// Packed words (int32): header {rows, seqs, logit rows, table words}; per row {token, page row,
// position} in step order; the logit rows (step rows, in the batch's order); the sequences' state
// slots; their table offsets [seqs + 1]; their block tables back to back.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/forward_batch.h"

namespace sparkglm {

inline constexpr int kStepHeaderWords = 4;
inline constexpr int kStepRowWords = 3;

struct StepSequence {
  int first_row = 0;  // in step order
  int rows = 0;
  int start = 0;        // absolute position of the first row
  int slot = 0;         // KDA state slot
  int index = 0;        // in step order: its block table is tables + index * table_stride
  bool decode = false;  // a decode row (one row), else a prompt piece of any length
};

struct StepCapacity {
  int max_rows = 0;
  int max_seqs = 0;
  int table_stride = 0;  // blocks per sequence: ceil(max_seq_len / block_size)
};

class StepLayout {
 public:
  StepLayout(const StepCapacity& capacity, int block_size, int topk_pools, int kpool);

  // Words the packed form can take at this capacity.
  size_t max_packed_words() const;
  // Lays out `batch` (validated by the caller) and writes its packed words into `packed`
  // (max_packed_words() long); returns how many were written. Throws Error(kInvalidArgument) when
  // the batch exceeds the capacity.
  size_t build(const ForwardBatch& batch, int32_t* packed);

  int rows() const { return rows_; }
  int decode_rows() const { return decode_rows_; }              // decode rows, first
  int dense_decode_rows() const { return dense_decode_rows_; }  // of those, the first attend all
  int max_decode_length() const { return max_decode_length_; }  // longest dense decode row + 1
  const std::vector<StepSequence>& seqs() const { return seqs_; }
  const std::vector<int32_t>& positions() const { return positions_; }  // step order
  // Step-order row of each of batch.logit_rows, in the batch's order.
  const std::vector<int32_t>& logit_rows() const { return logit_rows_; }
  int batch_row(int step_row) const { return batch_rows_[size_t(step_row)]; }
  bool is_sparse(int position) const { return (position + 1) / kpool_ > topk_pools_; }
  const StepCapacity& capacity() const { return capacity_; }

 private:
  StepCapacity capacity_;
  int block_size_, topk_pools_, kpool_;
  int rows_ = 0, decode_rows_ = 0, dense_decode_rows_ = 0, max_decode_length_ = 0;
  std::vector<StepSequence> seqs_;
  std::vector<int32_t> positions_, logit_rows_, batch_rows_;
};

}  // namespace sparkglm
