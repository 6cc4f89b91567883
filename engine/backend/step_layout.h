#pragma once
// One forward step in the order the CUDA runner computes it, and the packed words that carry it to
// the device. The batch's sequences are reordered: decode rows first (SequenceSlice::decode; those
// attending every earlier token before those the DSA indexer selects for), then the prompt pieces
// (prefill chunks, one-row pieces included), each a contiguous run of rows. Every kernel of the
// model is row-wise except attention and the KDA recurrence, so this order lets the decode rows run
// as one batch and each prefill chunk as one sequence. Host-only code, so the layout is tested
// without a GPU.
//
// Every decode row is a sequence of its own in the layout (a StepSequence of one row with its own
// copy of the block table), so each kernel computes it as a one-row decode slice. A verify slice
// (speculative decoding: a decode slice of n rows) becomes n such rows; row i of its slice is in
// wave i. Decode rows are ordered by wave within each class (dense, then sparse), and the KDA
// recurrence runs the groups of decode_groups() in order: wave 0's dense rows, wave 0's sparse
// rows, wave 1's dense rows, ... so each slot sees its rows in position order and a group never
// holds one slot twice.
//
// Packed words (int32): header {rows, seqs, logit rows, table words}; per row {token, page row,
// position} in step order; the logit rows (step rows, in the batch's order); the sequences' state
// slots; their table offsets [seqs + 1]; their block tables back to back; their KDA record words:
// record_after [seqs] (-1: none), then record_before [seqs] (0: record 0, -1: none). The record
// words travel with every step, so a captured verify step reads which rows record from the
// device, not from its launches.
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
  int wave = 0;         // a decode row: its row index within its batch slice
  // KDA state records of a decode row (SequenceSlice::record_states / record_before_row): after
  // it runs, the slot's state goes into record `record_after` (-1: none); with record_before,
  // the state just before it runs goes into record 0.
  int record_after = -1;
  bool record_before = false;
};

// Decode rows [first_row, first_row + rows) whose KDA recurrence runs as one batch.
struct StepGroup {
  int first_row = 0;
  int rows = 0;
};

struct StepCapacity {
  int max_rows = 0;
  int max_seqs = 0;      // StepSequences: prompt pieces plus decode rows
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
  // The decode rows' KDA groups in run order (one group [0, decode_rows) when no slice has more
  // than one decode row).
  const std::vector<StepGroup>& decode_groups() const { return decode_groups_; }
  // A decode slice of several rows, or KDA state records or resumes: the step is speculative.
  bool speculative() const { return speculative_; }
  // Some decode row keeps the KDA state after it (record_after >= 0) / before it (record_before).
  bool records_after() const { return records_after_; }
  bool records_before() const { return records_before_; }
  const std::vector<StepSequence>& seqs() const { return seqs_; }
  const std::vector<int32_t>& positions() const { return positions_; }  // step order
  // Step-order row of each of batch.logit_rows, in the batch's order.
  const std::vector<int32_t>& logit_rows() const { return logit_rows_; }
  int batch_row(int step_row) const { return batch_rows_[size_t(step_row)]; }
  bool is_sparse(int position) const { return (position + 1) / kpool_ > topk_pools_; }
  const StepCapacity& capacity() const { return capacity_; }
  int block_size() const { return block_size_; }

 private:
  StepCapacity capacity_;
  int block_size_, topk_pools_, kpool_;
  int rows_ = 0, decode_rows_ = 0, dense_decode_rows_ = 0, max_decode_length_ = 0;
  bool speculative_ = false, records_after_ = false, records_before_ = false;
  std::vector<StepSequence> seqs_;
  std::vector<StepGroup> decode_groups_;
  std::vector<int32_t> positions_, logit_rows_, batch_rows_;
};

}  // namespace sparkglm
