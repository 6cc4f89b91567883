// Speculative decoding on the CUDA runner (docs/speculative-decoding.md): the KDA state records
// of verify slices and their resumes, and the head-reduced states of a step's logit rows for the
// drafter. A verify slice's rows themselves are one-row decode rows of the step's layout
// (step_layout.h), computed by the decode kernels exactly as a one-row decode slice is.
#include <algorithm>
#include <cstring>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/kda_records.h"
#include "engine/backend/cuda/runner_kernels.h"

namespace sparkglm::cuda {

void CudaModelRunner::resume_records(const ForwardBatch& batch) {
  const int64_t H = config_.kda.num_heads, K = config_.kda.head_dim;
  const int64_t state = H * K * K, conv = 3 * (config_.kda.short_conv_kernel_size - 1) * H * K;
  const int64_t slots = options_.num_state_slots, records = caches_.records;
  const int64_t layers = config_.num_kda_layers();
  if (layers == 0) return;
  for (const SequenceSlice& s : batch.seqs) {
    if (s.resume_record < 0) continue;  // validate() keeps it below state_records
    // A slot's layers are `slots` entries apart, a record's `slots * records`: one 2D copy each.
    auto copy = [&](float* slot_base, const float* record_base, int64_t floats) {
      float* to = slot_base + int64_t(s.state_slot) * floats;
      const float* from =
          record_base + (int64_t(s.state_slot) * records + s.resume_record) * floats;
      const size_t row = size_t(floats) * sizeof(float);
      SPARKGLM_CUDA_CHECK(cudaMemcpy2DAsync(to, row * size_t(slots), from,
                                            row * size_t(slots * records), row, size_t(layers),
                                            cudaMemcpyDeviceToDevice, stream_));
    };
    copy(caches_.kda_state, caches_.record_state, state);
    copy(caches_.kda_conv, caches_.record_conv, conv);
  }
}

void CudaModelRunner::record_kda_states(int kda_index, const StepGroup& g, bool before) {
  // Launched for every group of a step where some row records (the step's graph key says so), so
  // a captured verify step has the same launches whichever rows record; rows read -1 and skip.
  if (!(before ? step_->layout().records_before() : step_->layout().records_after())) return;
  const int64_t H = config_.kda.num_heads, K = config_.kda.head_dim;
  const int64_t slots = options_.num_state_slots, records = caches_.records;
  KdaRecordPools p;
  p.state_floats = H * K * K;
  p.conv_floats = 3 * (config_.kda.short_conv_kernel_size - 1) * H * K;
  p.records = caches_.records;
  p.state = caches_.kda_state + kda_index * slots * p.state_floats;
  p.conv = caches_.kda_conv + kda_index * slots * p.conv_floats;
  p.record_state = caches_.record_state + kda_index * slots * records * p.state_floats;
  p.record_conv = caches_.record_conv + kda_index * slots * records * p.conv_floats;
  // Decode row i is step sequence i: its slot and record words sit at index i.
  const int32_t* words = before ? step_->record_before() : step_->record_after();
  kda_record_states(step_->slots() + g.first_row, words + g.first_row, g.rows, p, stream_);
}

void CudaModelRunner::hidden_to_host(const float* h, std::vector<float>& hidden) {
  const int64_t n = int64_t(step_->logit_rows().size()), D = config_.hidden_size;
  hidden.resize(size_t(n * D));
  for (int64_t c0 = 0; c0 < n; c0 += kLogitChunk) {
    const int64_t m = std::min<int64_t>(kLogitChunk, n - c0);
    gather_rows(h, step_->logit_rows_device() + c0, m, D, ws_.head_rows, stream_);
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(pinned_hidden_, ws_.head_rows, size_t(m * D) * 4,
                                        cudaMemcpyDeviceToHost, stream_));
    SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(hidden.data() + c0 * D, pinned_hidden_, size_t(m * D) * 4);
  }
}

}  // namespace sparkglm::cuda
