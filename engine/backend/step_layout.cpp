#include "engine/backend/step_layout.h"

#include <algorithm>
#include <string>

#include "engine/core/error.h"

namespace sparkglm {

StepLayout::StepLayout(const StepCapacity& capacity, int block_size, int topk_pools, int kpool)
    : capacity_(capacity), block_size_(block_size), topk_pools_(topk_pools), kpool_(kpool) {}

size_t StepLayout::max_packed_words() const {
  return kStepHeaderWords + size_t(kStepRowWords + 1) * size_t(capacity_.max_rows) +
         size_t(2 * capacity_.max_seqs + 1) +
         size_t(capacity_.max_seqs) * size_t(capacity_.table_stride);
}

size_t StepLayout::build(const ForwardBatch& batch, int32_t* packed) {
  const int nseq = int(batch.seqs.size());
  if (batch.num_rows() > capacity_.max_rows || nseq > capacity_.max_seqs)
    throw Error(ErrorKind::kInvalidArgument,
                "CUDA forward: a step of " + std::to_string(batch.num_rows()) + " rows and " +
                    std::to_string(nseq) + " sequences exceeds the runner's workspace (" +
                    std::to_string(capacity_.max_rows) + " rows, " +
                    std::to_string(capacity_.max_seqs) + " sequences)");
  // Step order of the sequences: dense decode, sparse decode, then prefill pieces (a one-row
  // prompt piece included: it runs the prefill kernels, as inside a longer piece).
  auto rank = [&](const SequenceSlice& s) {
    if (!s.decode) return 2;
    return is_sparse(s.start_position) ? 1 : 0;
  };
  std::vector<int> order;
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < nseq; ++i)
      if (rank(batch.seqs[size_t(i)]) == r) order.push_back(i);

  const int nlogit = int(batch.logit_rows.size());
  int32_t* row_data = packed + kStepHeaderWords;
  int32_t* logit_rows = row_data + batch.num_rows() * kStepRowWords;
  int32_t* slots = logit_rows + nlogit;
  int32_t* offsets = slots + nseq;
  int32_t* tables = offsets + nseq + 1;

  seqs_.clear();
  positions_.assign(size_t(batch.num_rows()), 0);
  batch_rows_.assign(size_t(batch.num_rows()), 0);
  std::vector<int32_t> new_row(size_t(batch.num_rows()), 0);  // batch row -> step row
  int row = 0, table_words = 0;
  decode_rows_ = dense_decode_rows_ = max_decode_length_ = 0;
  for (int k = 0; k < nseq; ++k) {
    const SequenceSlice& s = batch.seqs[size_t(order[size_t(k)])];
    if (int(s.block_table.size()) > capacity_.table_stride)
      throw Error(ErrorKind::kInvalidArgument,
                  "CUDA forward: a block table of " + std::to_string(s.block_table.size()) +
                      " blocks exceeds max-seq-len's " + std::to_string(capacity_.table_stride));
    seqs_.push_back({row, s.num_rows, s.start_position, s.state_slot, k, s.decode});
    slots[k] = s.state_slot;
    offsets[k] = table_words;
    std::copy(s.block_table.begin(), s.block_table.end(), tables + table_words);
    table_words += int(s.block_table.size());
    if (s.decode) {
      ++decode_rows_;
      if (!is_sparse(s.start_position)) {
        ++dense_decode_rows_;
        max_decode_length_ = std::max(max_decode_length_, s.start_position + 1);
      }
    }
    for (int i = 0; i < s.num_rows; ++i, ++row) {
      const int b = s.first_row + i, pos = s.start_position + i;
      new_row[size_t(b)] = row;
      batch_rows_[size_t(row)] = b;
      positions_[size_t(row)] = pos;
      row_data[row * kStepRowWords] = batch.tokens[size_t(b)];
      row_data[row * kStepRowWords + 1] =
          s.block_table[size_t(pos / block_size_)] * block_size_ + pos % block_size_;
      row_data[row * kStepRowWords + 2] = pos;
    }
  }
  offsets[nseq] = table_words;
  rows_ = row;
  logit_rows_.clear();
  for (int i = 0; i < nlogit; ++i) {
    logit_rows[i] = new_row[size_t(batch.logit_rows[size_t(i)])];
    logit_rows_.push_back(logit_rows[i]);
  }
  packed[0] = rows_;
  packed[1] = nseq;
  packed[2] = nlogit;
  packed[3] = table_words;
  return size_t(tables + table_words - packed);
}

}  // namespace sparkglm
