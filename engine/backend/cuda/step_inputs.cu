#include "engine/backend/cuda/step_inputs.h"

#include <algorithm>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

// Staging layout (int32 words): header {rows, seqs, logit rows, table words}, then per row
// {token, page row, position}, the logit rows, the slots, the table offsets [seqs + 1], and the
// tables back to back.
constexpr int kHeader = 4;
constexpr int kPerRow = 3;

__global__ void unpack_kernel(const int32_t* staging, int max_rows, int max_seqs, int stride,
                              int32_t* fixed) {
  const int rows = staging[0], seqs = staging[1], logits = staging[2];
  const int32_t* row_data = staging + kHeader;
  const int32_t* logit_rows = row_data + rows * kPerRow;
  const int32_t* slots = logit_rows + logits;
  const int32_t* offsets = slots + seqs;
  const int32_t* tables = offsets + seqs + 1;
  int32_t* tokens = fixed;
  int32_t* page_rows = fixed + max_rows;
  int32_t* lengths = fixed + 2 * max_rows;
  int32_t* positions = fixed + 3 * max_rows;
  int32_t* logit_out = fixed + 4 * max_rows;
  int32_t* slot_out = fixed + 5 * max_rows;
  int32_t* table_out = slot_out + max_seqs;
  const int tid = int(blockIdx.x * blockDim.x + threadIdx.x), step = int(gridDim.x * blockDim.x);
  for (int r = tid; r < rows; r += step) {
    tokens[r] = row_data[r * kPerRow];
    page_rows[r] = row_data[r * kPerRow + 1];
    positions[r] = row_data[r * kPerRow + 2];
    lengths[r] = row_data[r * kPerRow + 2] + 1;
  }
  for (int i = tid; i < logits; i += step) logit_out[i] = logit_rows[i];
  for (int s = tid; s < seqs; s += step) slot_out[s] = slots[s];
  for (int s = 0; s < seqs; ++s)
    for (int i = offsets[s] + tid; i < offsets[s + 1]; i += step)
      table_out[int64_t(s) * stride + (i - offsets[s])] = tables[i];
}

}  // namespace

StepInputs::StepInputs(const StepCapacity& capacity, int block_size, int topk_pools, int kpool)
    : capacity_(capacity), block_size_(block_size), topk_pools_(topk_pools), kpool_(kpool) {
  staging_words_ = kHeader + size_t(kPerRow + 1) * size_t(capacity.max_rows) +
                   size_t(2 * capacity.max_seqs + 1) +
                   size_t(capacity.max_seqs) * size_t(capacity.table_stride);
  SPARKGLM_CUDA_CHECK(cudaMallocHost(&host_, staging_words_ * sizeof(int32_t)));
  staging_ = DeviceBuffer(staging_words_ * sizeof(int32_t));
  const size_t fixed_words = size_t(kRowArrays) * size_t(capacity.max_rows) +
                             size_t(capacity.max_seqs) * size_t(capacity.table_stride + 1);
  fixed_buffer_ = DeviceBuffer(fixed_words * sizeof(int32_t));
  fixed_ = static_cast<int32_t*>(fixed_buffer_.data());
  SPARKGLM_CUDA_CHECK(cudaMemset(fixed_, 0, fixed_words * sizeof(int32_t)));
}

StepInputs::~StepInputs() {
  cudaFreeHost(host_);
}

void StepInputs::load(const ForwardBatch& batch, cudaStream_t stream) {
  const int nseq = int(batch.seqs.size());
  if (batch.num_rows() > capacity_.max_rows || nseq > capacity_.max_seqs)
    throw Error(ErrorKind::kInvalidArgument,
                "CUDA forward: a step of " + std::to_string(batch.num_rows()) + " rows and " +
                    std::to_string(nseq) + " sequences exceeds the runner's workspace (" +
                    std::to_string(capacity_.max_rows) + " rows, " +
                    std::to_string(capacity_.max_seqs) + " sequences)");
  // Step order of the sequences: dense decode, sparse decode, then prefill chunks.
  auto rank = [&](const SequenceSlice& s) {
    if (s.num_rows != 1) return 2;
    return is_sparse(s.start_position) ? 1 : 0;
  };
  std::vector<int> order;
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < nseq; ++i)
      if (rank(batch.seqs[size_t(i)]) == r) order.push_back(i);

  const int nlogit = int(batch.logit_rows.size());
  int32_t* row_data = host_ + kHeader;
  int32_t* logit_rows = row_data + batch.num_rows() * kPerRow;
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
    seqs_.push_back({row, s.num_rows, s.start_position, s.state_slot, k});
    slots[k] = s.state_slot;
    offsets[k] = table_words;
    std::copy(s.block_table.begin(), s.block_table.end(), tables + table_words);
    table_words += int(s.block_table.size());
    if (s.num_rows == 1) {
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
      row_data[row * kPerRow] = batch.tokens[size_t(b)];
      row_data[row * kPerRow + 1] =
          s.block_table[size_t(pos / block_size_)] * block_size_ + pos % block_size_;
      row_data[row * kPerRow + 2] = pos;
    }
  }
  offsets[nseq] = table_words;
  rows_ = row;
  logit_rows_host_.clear();
  for (int i = 0; i < nlogit; ++i) {
    logit_rows[i] = new_row[size_t(batch.logit_rows[size_t(i)])];
    logit_rows_host_.push_back(logit_rows[i]);
  }
  host_[0] = rows_;
  host_[1] = nseq;
  host_[2] = nlogit;
  host_[3] = table_words;
  const size_t used = size_t(tables + table_words - host_);
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(staging_.data(), host_, used * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, stream));
  unpack_kernel<<<32, 256, 0, stream>>>(static_cast<const int32_t*>(staging_.data()),
                                        capacity_.max_rows, capacity_.max_seqs,
                                        capacity_.table_stride, fixed_);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
