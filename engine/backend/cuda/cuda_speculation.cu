// Speculative decoding on the CUDA runner (docs/speculative-decoding.md): the KDA state records
// of verify slices and their resumes, the head-reduced states of a step's logit rows for the
// drafter, and the drafter's first forward inside a verify step (StepSampling::draft_on_picks):
// after the layers, in the same launches (the same graph), the head over every row, each row's
// greedy pick on the device, and the MTP module on (pick, h) as decode rows of the step, so the
// step returns the next drafts' logits with one wait instead of two forwards; and, where the
// scheduler asks (StepSampling::draft_chain), the module's later passes from each slice's accepted
// row (draft_chain.h), so the whole chain comes with that wait too. A verify slice's rows
// themselves are one-row decode rows of the step's layout (step_layout.h), computed by the decode
// kernels exactly as a one-row decode slice is.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/runner_kernels.h"
#include "engine/backend/cuda/sampling.h"

namespace sparkglm::cuda {

namespace {

// Rows of `width` values in step order (pinned) to logit order: logit row i is step row order[i].
void by_logit_order(const std::vector<int32_t>& order, const float* rows, int64_t width,
                    std::vector<float>& out) {
  out.resize(order.size() * size_t(width));
  for (size_t i = 0; i < order.size(); ++i)
    std::copy_n(rows + int64_t(order[i]) * width, width, out.data() + int64_t(i) * width);
}

}  // namespace

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

bool CudaModelRunner::drafts_fit(const StepSampling& sampling) const {
  const int64_t T = step_->rows();
  if (!sampling.draft_on_picks || !shape().drafts || T == 0 || T > kDecodeMaxRows ||
      step_->decode_rows() != T || int64_t(step_->logit_rows().size()) != T)
    return false;
  return std::none_of(sampling.picked.begin(), sampling.picked.end(),
                      [](uint8_t p) { return p != 0; });
}

void CudaModelRunner::run_draft_rows() {
  const ModelWeights& mw = weights_->weights();
  const int64_t T = step_->rows(), D = config_.hidden_size, V = config_.vocab_size;
  // The head over every row (all are logit rows; step order) and each row's greedy pick, which
  // is the module's input token at that row.
  profile_.mark("head", stream_);
  rms_norm_rows(ws_.y, mw.final_norm, config_.rms_norm_eps, T, D, ws_.head_rows, ws_.head_bf16,
                stream_);
  project_decode(gemm_, mw.lm_head, ws_.head_bf16, T, ws_.logits, stream_);
  // The module's input on each row's greedy pick (scanned in its launch where the vocabulary
  // allows), the picks kept in draft_picks.
  const GreedyPicks picks = greedy_picks(ws_.logits, T, V, ws_.draft_picks, stream_,
                                         static_cast<unsigned long long*>(greedy_keys_.data()));
  mtp_entry_picked_bf16(mtp_entry(), picks, ws_.draft_picks, ws_.y, T, stream_);
  main_rows_to_host();
  profile_.mark("mtp", stream_);
  mtp_layers(mw.mtp->head_norm);  // head-normed into ws_.head_bf16
  project_decode(gemm_, mw.lm_head, ws_.head_bf16, T, ws_.draft_logits, stream_);
  if (chain_passes() > 0) run_chain_passes();
  // The main rows' copies ran beside the module's passes; the step ends after both.
  copies_->join_into(stream_);
}

void CudaModelRunner::run_prompt_drafts(const StepSampling& sampling, QueuedStep& q) {
  const int64_t T = step_->rows(), n = int64_t(step_->logit_rows().size());
  SPARKGLM_ASSERT(pinned_prompt_ != nullptr && int64_t(sampling.mtp_next.size()) == T,
                  "StepSampling::mtp_next: one entry per row, on a runner built for drafts");
  const std::vector<int32_t>& order = step_->logit_rows();  // logit row i is step row order[i]
  std::vector<int32_t> logit_of(static_cast<size_t>(T), -1);
  for (int64_t i = 0; i < n; ++i) logit_of[size_t(order[size_t(i)])] = int32_t(i);
  // The pinned inputs are free: the last call ended synchronised (head_to_host below).
  int32_t* next = pinned_prompt_;
  int32_t* from = pinned_prompt_ + options_.max_rows;
  for (int64_t r = 0; r < T; ++r) {
    const int32_t t = sampling.mtp_next[size_t(step_->batch_row(int(r)))];
    SPARKGLM_ASSERT(t >= 0 || logit_of[size_t(r)] >= 0,
                    "StepSampling::mtp_next: a pick (-1) asked at a row that is not a logit row");
    next[r] = std::max(t, 0);
    from[r] = t < 0 ? logit_of[size_t(r)] : -1;
  }
  auto* tokens = static_cast<int32_t*>(prompt_tokens_.data());
  auto* picked = static_cast<int32_t*>(prompt_from_.data());
  SPARKGLM_CUDA_CHECK(
      cudaMemcpyAsync(tokens, next, size_t(T) * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  SPARKGLM_CUDA_CHECK(
      cudaMemcpyAsync(picked, from, size_t(T) * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  // head_picks left each logit row's pick (greedy where the runner does not draw it) in picks_.
  take_picked_tokens(picked, static_cast<const int32_t*>(picks_.data()), T, tokens, stream_);
  profile_.mark("mtp", stream_);
  const float* z = mtp_module(tokens, ws_.y);
  ForwardOutput drafts;
  head_to_host(z, weights_->weights().mtp->head_norm, drafts);  // waits for the stream
  q.draft_logits = std::move(drafts.logits);
  q.draft_hidden = std::move(drafts.hidden);
  q.draft_tokens.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const int32_t r = order[size_t(i)];
    q.draft_tokens[size_t(i)] = from[r] >= 0 ? pinned_picks_[q.parity][i] : next[r];
  }
}

void CudaModelRunner::plan_chain(const ForwardBatch& batch, const StepSampling& sampling) {
  if (!chain_) return;
  if (step_drafts_ && sampling.draft_chain > 0 && options_.selection_trace == nullptr &&
      chain_->plan(batch, *step_, sampling.draft_chain, *chain_step_, stream_)) {
    set_chain_buckets();
  } else {
    chain_->clear();
  }
}

void CudaModelRunner::run_chain_passes() {
  const ModelWeights& mw = weights_->weights();
  auto* keys = static_cast<unsigned long long*>(greedy_keys_.data());
  profile_.mark("mtp.chain", stream_);
  chain_->begin(*step_, ws_.draft_picks, ws_.draft_logits, ws_.X, *chain_step_, options_.block_size,
                stream_, keys, mtp_entry());
  // The passes run with the chain's rows as the step, at the chain's buckets; the verify step's
  // come back however they end.
  struct AsChainStep {
    CudaModelRunner& r;
    int length, pools;
    explicit AsChainStep(CudaModelRunner& runner)
        : r(runner), length(runner.length_bucket_), pools(runner.pool_bucket_) {
      std::swap(r.step_, r.chain_step_);
      r.length_bucket_ = r.chain_bucket_;
      r.pool_bucket_ = r.chain_pool_bucket_;
    }
    ~AsChainStep() {
      std::swap(r.step_, r.chain_step_);
      r.length_bucket_ = length;
      r.pool_bucket_ = pools;
    }
  } as_chain(*this);
  const int64_t B = step_->rows();
  // Each pass's input was written by the launch before it (begin, then advance).
  for (int pass = 1; pass <= chain_->passes(); ++pass) {
    const float* z = mtp_layers(mw.mtp->head_norm);
    project_decode(gemm_, mw.lm_head, ws_.head_bf16, B, chain_->logits(), stream_);
    chain_->advance(pass, chain_->logits(), z, *step_, options_.block_size, stream_, keys,
                    mtp_entry());
  }
}

void CudaModelRunner::main_rows_to_host() {
  const int64_t T = step_->rows(), D = config_.hidden_size, V = config_.vocab_size;
  // On a branch, so that the module's passes do not wait for three copies: nothing after this
  // in the step writes the logits, the final states or the picks (the MTP layer has no mHC), and
  // run_draft_rows joins the branch before the step ends.
  const cudaStream_t copies = copies_->fork(stream_);
  auto to_host = [&](void* host, const void* device, size_t bytes) {
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, copies));
  };
  to_host(pinned_logits_, ws_.logits, size_t(T * V) * 4);
  to_host(pinned_hidden_, ws_.y, size_t(T * D) * 4);
  to_host(pinned_draft_picks_, ws_.draft_picks, size_t(T) * sizeof(int32_t));
  // Inside a capture the event is recorded by a node of the graph, each time it runs.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  SPARKGLM_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
  SPARKGLM_CUDA_CHECK(capturing == cudaStreamCaptureStatusActive
                          ? cudaEventRecordWithFlags(main_ready_, copies, cudaEventRecordExternal)
                          : cudaEventRecord(main_ready_, copies));
  copies_->close();
}

void CudaModelRunner::drafts_to_host(QueuedStep& q) {
  const int64_t T = step_->rows(), D = config_.hidden_size, V = config_.vocab_size;
  const int p = q.parity;
  q.drafts = true;
  q.logit_order = step_->logit_rows();
  q.chain_width = chain_passes() > 0 ? chain_->width() : 0;
  if (q.chain_width > 0) {
    // The host reads the chains only (Speculator::commit_main); the MTP rows stay here.
    chain_->to_host(stream_, p);
  } else {
    // mtp_module's output state is in ws_.X.
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(pinned_draft_logits_[p], ws_.draft_logits,
                                        size_t(T * V) * 4, cudaMemcpyDeviceToHost, stream_));
    SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(pinned_draft_hidden_[p], ws_.X, size_t(T * D) * 4,
                                        cudaMemcpyDeviceToHost, stream_));
  }
  SPARKGLM_CUDA_CHECK(cudaEventRecord(picks_copied_[p], stream_));
  SPARKGLM_CUDA_CHECK(cudaEventRecord(step_ended_[p], stream_));
  profile_.end_step(stream_, "decode");
  using Seconds = std::chrono::duration<double>;
  const auto now = std::chrono::steady_clock::now();
  draft_times_.host_seconds += Seconds(now - submit_began_).count();
  draft_times_.load_seconds += Seconds(step_loaded_ - submit_began_).count();
  draft_times_.plan_seconds += Seconds(chain_planned_ - step_loaded_).count();
  draft_times_.launch_seconds += Seconds(step_launched_ - chain_planned_).count();
  if (main_handed_) draft_times_.between_seconds += Seconds(submit_began_ - *main_handed_).count();
  main_handed_.reset();
}

void CudaModelRunner::take_main_rows(QueuedStep& q) {
  if (!q.drafts || q.main_taken) return;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point waiting = Clock::now();
  SPARKGLM_CUDA_CHECK(cudaEventSynchronize(main_ready_));
  const Clock::time_point waited = Clock::now();
  by_logit_order(q.logit_order, pinned_logits_, config_.vocab_size, q.logits);
  by_logit_order(q.logit_order, pinned_hidden_, config_.hidden_size, q.hidden);
  q.draft_tokens.resize(q.logit_order.size());
  for (size_t i = 0; i < q.logit_order.size(); ++i)
    q.draft_tokens[i] = pinned_draft_picks_[q.logit_order[i]];
  q.main_taken = true;
  // The graph's first node ran before main_ready_: its lag can be read before the next step
  // records its own.
  float lag_ms = 0;
  SPARKGLM_CUDA_CHECK(cudaEventElapsedTime(&lag_ms, run_began_[q.parity], graph_began_));
  using Seconds = std::chrono::duration<double>;
  draft_times_.lag_seconds += 1e-3 * double(lag_ms);
  float main_ms = 0;
  SPARKGLM_CUDA_CHECK(cudaEventElapsedTime(&main_ms, run_began_[q.parity], main_ready_));
  draft_times_.main_seconds += 1e-3 * double(main_ms);
  if (q.follows >= 0) {  // the earlier step has ended, and the next one is not submitted yet
    float idle_ms = 0;
    SPARKGLM_CUDA_CHECK(
        cudaEventElapsedTime(&idle_ms, step_ended_[q.follows], step_began_[q.parity]));
    draft_times_.idle_seconds += 1e-3 * double(idle_ms);
  }
  draft_times_.wait_seconds += Seconds(waited - waiting).count();
  draft_times_.host_seconds += Seconds(Clock::now() - waited).count();
}

void CudaModelRunner::collect_drafts(QueuedStep& q, StepResult& result) {
  const bool early = q.main_taken;  // collect_main moved the main rows out already
  take_main_rows(q);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point waiting = Clock::now();
  // The step has run: its last event, which the device time below reads (picks_copied_ comes
  // before it on the stream, and an event after it may still be pending when it completes).
  SPARKGLM_CUDA_CHECK(cudaEventSynchronize(step_ended_[q.parity]));
  const Clock::time_point waited = Clock::now();
  if (!early) hand_main_rows(q, result);
  const int64_t D = config_.hidden_size, V = config_.vocab_size;
  if (q.chain_width > 0) {
    chain_->spread(q.parity, int64_t(q.logit_order.size()), result.draft_chain);
  } else {
    by_logit_order(q.logit_order, pinned_draft_logits_[q.parity], V, result.draft_logits);
    by_logit_order(q.logit_order, pinned_draft_hidden_[q.parity], D, result.draft_hidden);
  }
  float device_ms = 0, run_ms = 0;
  SPARKGLM_CUDA_CHECK(
      cudaEventElapsedTime(&device_ms, step_began_[q.parity], step_ended_[q.parity]));
  SPARKGLM_CUDA_CHECK(cudaEventElapsedTime(&run_ms, run_began_[q.parity], run_ended_[q.parity]));
  using Seconds = std::chrono::duration<double>;
  draft_times_.steps += 1;
  draft_times_.device_seconds += 1e-3 * double(device_ms);
  draft_times_.run_seconds += 1e-3 * double(run_ms);
  draft_times_.wait_seconds += Seconds(waited - waiting).count();
  draft_times_.host_seconds += Seconds(Clock::now() - waited).count();
}

void CudaModelRunner::collect_main(StepResult& main) {
  SPARKGLM_ASSERT(!queued_.empty() && !queued_.back().main_taken,
                  "CudaModelRunner::collect_main: no step submitted since the last collect_main");
  QueuedStep& q = queued_.back();
  // drafts_fit() ran the step without draft rows (more rows than the decode kernels take, as 8
  // slices of k = 4 are): no chain, so `main` stays empty and the scheduler collects the step
  // whole, the drafter drafting on the host.
  if (!q.drafts) {
    main.draft_chain_width = 0;
    return;
  }
  take_main_rows(q);
  hand_main_rows(q, main);
  main.draft_chain_width = q.chain_width;
  main_handed_ = std::chrono::steady_clock::now();
}

void CudaModelRunner::hand_main_rows(QueuedStep& q, StepResult& result) {
  result.tokens = q.draft_tokens;  // the greedy picks the draft rows took
  result.logits = std::move(q.logits);
  result.hidden = std::move(q.hidden);
  result.draft_tokens = std::move(q.draft_tokens);
}

}  // namespace sparkglm::cuda
