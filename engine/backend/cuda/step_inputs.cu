#include "engine/backend/cuda/step_inputs.h"

#include <algorithm>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

// Spreads the packed words (step_layout.h) into the fixed arrays of StepInputs.
constexpr int kHeader = kStepHeaderWords;
constexpr int kPerRow = kStepRowWords;

// Words past the layout's that the same transfer brought: `count` from staging[at] to `to`.
struct Spread {
  int at = 0, count = 0;
  int32_t* to = nullptr;
};

__global__ void unpack_kernel(const int32_t* staging, int max_rows, int max_seqs, int stride,
                              int32_t* fixed, Spread slices, Spread tail) {
  const int rows = staging[0], seqs = staging[1], logits = staging[2];
  const int32_t* row_data = staging + kHeader;
  const int32_t* logit_rows = row_data + rows * kPerRow;
  const int32_t* slots = logit_rows + logits;
  const int32_t* offsets = slots + seqs;
  const int32_t* tables = offsets + seqs + 1;
  const int32_t* records = tables + staging[3];  // record_after [seqs], record_before [seqs]
  int32_t* tokens = fixed;
  int32_t* page_rows = fixed + max_rows;
  int32_t* lengths = fixed + 2 * max_rows;
  int32_t* positions = fixed + 3 * max_rows;
  int32_t* logit_out = fixed + 4 * max_rows;
  int32_t* slot_out = fixed + 5 * max_rows;
  int32_t* table_out = slot_out + max_seqs;
  int32_t* record_after_out = table_out + int64_t(max_seqs) * stride;
  int32_t* record_before_out = record_after_out + max_seqs;
  const int tid = int(blockIdx.x * blockDim.x + threadIdx.x), step = int(gridDim.x * blockDim.x);
  for (int r = tid; r < rows; r += step) {
    tokens[r] = row_data[r * kPerRow];
    page_rows[r] = row_data[r * kPerRow + 1];
    positions[r] = row_data[r * kPerRow + 2];
    lengths[r] = row_data[r * kPerRow + 2] + 1;
  }
  for (int i = tid; i < logits; i += step) logit_out[i] = logit_rows[i];
  for (int s = tid; s < seqs; s += step) {
    slot_out[s] = slots[s];
    record_after_out[s] = records[s];
    record_before_out[s] = records[seqs + s];
  }
  for (int s = 0; s < seqs; ++s)
    for (int i = offsets[s] + tid; i < offsets[s + 1]; i += step)
      table_out[int64_t(s) * stride + (i - offsets[s])] = tables[i];
  for (int i = tid; i < slices.count; i += step) slices.to[i] = staging[slices.at + i];
  for (int i = tid; i < tail.count; i += step) tail.to[i] = staging[tail.at + i];
}

}  // namespace

StepInputs::StepInputs(const StepCapacity& capacity, int block_size, int topk_pools, int kpool)
    : layout_(capacity, block_size, topk_pools, kpool) {
  // The layout's words, then a speculative step's slice words, then a caller's tail.
  const size_t words = layout_.max_packed_words() + slice_words() + kStepTailWords;
  SPARKGLM_CUDA_CHECK(cudaMallocHost(&host_, words * sizeof(int32_t)));
  staging_ = DeviceBuffer(words * sizeof(int32_t));
  const size_t fixed_words = size_t(kRowArrays) * size_t(capacity.max_rows) +
                             size_t(capacity.max_seqs) * size_t(capacity.table_stride + 3);
  fixed_buffer_ = DeviceBuffer(fixed_words * sizeof(int32_t));
  fixed_ = static_cast<int32_t*>(fixed_buffer_.data());
  SPARKGLM_CUDA_CHECK(cudaMemset(fixed_, 0, fixed_words * sizeof(int32_t)));
  SPARKGLM_CUDA_CHECK(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
  slice_buffer_ = DeviceBuffer(slice_words() * sizeof(int32_t));
  slice_words_ = static_cast<int32_t*>(slice_buffer_.data());
}

StepInputs::~StepInputs() {
  cudaEventDestroy(copied_);
  cudaFreeHost(host_);
}

size_t StepInputs::slice_words() const {
  return 3 * size_t(layout_.capacity().max_seqs) + 1;
}

size_t StepInputs::pack_slices(int32_t* slice_host) {
  slices_ = longest_slice_ = 0;
  if (!layout_.speculative()) return 0;
  // Decode row i is step sequence i (one row each); a slot's rows come in wave order, which is
  // position order (step_layout.h).
  const int max_seqs = layout_.capacity().max_seqs;
  std::vector<int> slots;
  std::vector<std::vector<int32_t>> rows;
  for (int i = 0; i < layout_.decode_rows(); ++i) {
    const StepSequence& q = layout_.seqs()[size_t(i)];
    const auto at = std::find(slots.begin(), slots.end(), q.slot);
    if (at == slots.end()) {
      slots.push_back(q.slot);
      rows.push_back({q.first_row});
    } else {
      rows[size_t(at - slots.begin())].push_back(q.first_row);
    }
  }
  int32_t* slot_words = slice_host;
  int32_t* first = slice_host + max_seqs;
  int32_t* row_words = first + max_seqs + 1;
  first[0] = 0;
  for (size_t b = 0; b < slots.size(); ++b) {
    slot_words[b] = slots[b];
    std::copy(rows[b].begin(), rows[b].end(), row_words + first[b]);
    first[b + 1] = first[b] + int32_t(rows[b].size());
    longest_slice_ = std::max(longest_slice_, int(rows[b].size()));
  }
  slices_ = int(slots.size());
  return slice_words();
}

void StepInputs::load(const ForwardBatch& batch, cudaStream_t stream) {
  build(batch);
  upload(stream, Tail{});
}

void StepInputs::build(const ForwardBatch& batch) {
  // A pipelined caller loads step N+1 while step N's copy may still be queued: wait for that
  // copy to have read the staging before overwriting it.
  SPARKGLM_CUDA_CHECK(cudaEventSynchronize(copied_));
  layout_words_ = layout_.build(batch, host_);
  slice_count_ = pack_slices(host_ + layout_words_);
}

void StepInputs::upload(cudaStream_t stream, const Tail& tail) {
  SPARKGLM_ASSERT(tail.count >= 0 && tail.count <= kStepTailWords && (tail.count == 0 || tail.to),
                  "StepInputs::upload: a tail of at most kStepTailWords words and its destination");
  const size_t tail_at = layout_words_ + slice_count_;
  std::copy_n(tail.words, tail.count, host_ + tail_at);
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(staging_.data(), host_,
                                      (tail_at + size_t(tail.count)) * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, stream));
  SPARKGLM_CUDA_CHECK(cudaEventRecord(copied_, stream));
  const StepCapacity& c = layout_.capacity();
  unpack_kernel<<<32, 256, 0, stream>>>(static_cast<const int32_t*>(staging_.data()), c.max_rows,
                                        c.max_seqs, c.table_stride, fixed_,
                                        Spread{int(layout_words_), int(slice_count_), slice_words_},
                                        Spread{int(tail_at), tail.count, tail.to});
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
