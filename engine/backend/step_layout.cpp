#include "engine/backend/step_layout.h"

#include <algorithm>
#include <string>
#include <utility>

#include "engine/core/error.h"

namespace sparkglm {

StepLayout::StepLayout(const StepCapacity& capacity, int block_size, int topk_pools, int kpool)
    : capacity_(capacity), block_size_(block_size), topk_pools_(topk_pools), kpool_(kpool) {}

size_t StepLayout::max_packed_words() const {
  return kStepHeaderWords + size_t(kStepRowWords + 1) * size_t(capacity_.max_rows) +
         size_t(4 * capacity_.max_seqs + 1) +
         size_t(capacity_.max_seqs) * size_t(capacity_.table_stride);
}

size_t StepLayout::build(const ForwardBatch& batch, int32_t* packed) {
  const int nseq = int(batch.seqs.size());
  // Every decode row is a StepSequence of its own; a prompt piece is one.
  int step_seqs = 0;
  for (const SequenceSlice& s : batch.seqs) step_seqs += s.decode ? s.num_rows : 1;
  if (batch.num_rows() > capacity_.max_rows || step_seqs > capacity_.max_seqs)
    throw Error(ErrorKind::kInvalidArgument,
                "CUDA forward: a step of " + std::to_string(batch.num_rows()) + " rows and " +
                    std::to_string(step_seqs) + " sequences (decode rows and prompt pieces) " +
                    "exceeds the runner's workspace (" + std::to_string(capacity_.max_rows) +
                    " rows, " + std::to_string(capacity_.max_seqs) + " sequences)");
  for (const SequenceSlice& s : batch.seqs)
    if (s.record_states && !s.decode)
      throw Error(ErrorKind::kUnsupported,
                  "CUDA forward: KDA state records of a prompt piece (record_states on a slice "
                  "that is not decode): the CUDA runner records the rows of verify slices only");
  for (const SequenceSlice& s : batch.seqs)
    if (int(s.block_table.size()) > capacity_.table_stride)
      throw Error(ErrorKind::kInvalidArgument,
                  "CUDA forward: a block table of " + std::to_string(s.block_table.size()) +
                      " blocks exceeds max-seq-len's " + std::to_string(capacity_.table_stride));
  // Step order: dense decode rows, sparse decode rows (each by wave, then by batch sequence),
  // then prefill pieces (a one-row prompt piece included: it runs the prefill kernels, as inside
  // a longer piece). An entry is (batch sequence, row within it; -1 for a whole prompt piece).
  int waves = 0;
  speculative_ = false;
  for (const SequenceSlice& s : batch.seqs) {
    if (s.decode) waves = std::max(waves, int(s.num_rows));
    speculative_ = speculative_ || (s.decode && s.num_rows > 1) || s.record_states ||
                   s.record_before_row >= 0 || s.resume_record >= 0;
  }
  std::vector<std::pair<int, int>> order;
  std::vector<int> class_wave_end;  // per (class, wave): the end of its run in `order`
  for (int sparse = 0; sparse < 2; ++sparse)
    for (int w = 0; w < waves; ++w) {
      for (int i = 0; i < nseq; ++i) {
        const SequenceSlice& s = batch.seqs[size_t(i)];
        if (s.decode && w < s.num_rows && is_sparse(s.start_position + w) == (sparse == 1))
          order.emplace_back(i, w);
      }
      class_wave_end.push_back(int(order.size()));
    }
  const int decode_end = int(order.size());
  for (int i = 0; i < nseq; ++i)
    if (!batch.seqs[size_t(i)].decode) order.emplace_back(i, -1);

  const int nlogit = int(batch.logit_rows.size());
  int32_t* row_data = packed + kStepHeaderWords;
  int32_t* logit_rows = row_data + batch.num_rows() * kStepRowWords;
  int32_t* slots = logit_rows + nlogit;
  int32_t* offsets = slots + step_seqs;
  int32_t* tables = offsets + step_seqs + 1;

  seqs_.clear();
  positions_.assign(size_t(batch.num_rows()), 0);
  batch_rows_.assign(size_t(batch.num_rows()), 0);
  std::vector<int32_t> new_row(size_t(batch.num_rows()), 0);  // batch row -> step row
  int row = 0, table_words = 0;
  decode_rows_ = dense_decode_rows_ = max_decode_length_ = 0;
  records_after_ = records_before_ = false;
  for (int k = 0; k < int(order.size()); ++k) {
    const auto [si, wave] = order[size_t(k)];
    const SequenceSlice& s = batch.seqs[size_t(si)];
    const bool decode = wave >= 0;
    const int first = decode ? s.first_row + wave : s.first_row;
    const int rows = decode ? 1 : s.num_rows;
    const int start = s.start_position + (decode ? wave : 0);
    StepSequence q{row, rows, start, s.state_slot, k, decode};
    if (decode) {
      q.wave = wave;
      q.record_after = s.record_states ? wave : -1;
      q.record_before = s.record_before_row == wave;
      records_after_ = records_after_ || q.record_after >= 0;
      records_before_ = records_before_ || q.record_before;
    }
    seqs_.push_back(q);
    slots[k] = s.state_slot;
    offsets[k] = table_words;
    std::copy(s.block_table.begin(), s.block_table.end(), tables + table_words);
    table_words += int(s.block_table.size());
    if (decode) {
      ++decode_rows_;
      if (!is_sparse(start)) {
        ++dense_decode_rows_;
        max_decode_length_ = std::max(max_decode_length_, start + 1);
      }
    }
    for (int i = 0; i < rows; ++i, ++row) {
      const int b = first + i, pos = start + i;
      new_row[size_t(b)] = row;
      batch_rows_[size_t(row)] = b;
      positions_[size_t(row)] = pos;
      row_data[row * kStepRowWords] = batch.tokens[size_t(b)];
      row_data[row * kStepRowWords + 1] =
          s.block_table[size_t(pos / block_size_)] * block_size_ + pos % block_size_;
      row_data[row * kStepRowWords + 2] = pos;
    }
  }
  offsets[step_seqs] = table_words;
  int32_t* record_after = tables + table_words;
  int32_t* record_before = record_after + step_seqs;
  for (int k = 0; k < step_seqs; ++k) {
    record_after[k] = seqs_[size_t(k)].record_after;
    record_before[k] = seqs_[size_t(k)].record_before ? 0 : -1;
  }
  rows_ = row;
  // KDA groups: the decode rows as one batch when every slice has one decode row, else each
  // (class, wave) run, wave by wave (dense before sparse within a wave).
  decode_groups_.clear();
  if (waves <= 1) {
    if (decode_end > 0) decode_groups_.push_back({0, decode_end});
  } else {
    for (int w = 0; w < waves; ++w)
      for (int sparse = 0; sparse < 2; ++sparse) {
        const int c = sparse * waves + w;
        const int b = c == 0 ? 0 : class_wave_end[size_t(c - 1)], e = class_wave_end[size_t(c)];
        if (e > b) decode_groups_.push_back({b, e - b});  // decode entries are one row each
      }
  }
  logit_rows_.clear();
  for (int i = 0; i < nlogit; ++i) {
    logit_rows[i] = new_row[size_t(batch.logit_rows[size_t(i)])];
    logit_rows_.push_back(logit_rows[i]);
  }
  packed[0] = rows_;
  packed[1] = step_seqs;
  packed[2] = nlogit;
  packed[3] = table_words;
  return size_t(record_before + step_seqs - packed);
}

}  // namespace sparkglm
