// Pipelined steps of the CUDA runner (ModelRunner::submit / collect). submit() loads the step,
// patches in the tokens the previous step picked on the device, launches it and the head, picks
// every logit row's token on the device (greedy, or the seeded draw of sampler.h, the CPU's token
// bit for bit) and queues the copy of those ids to pinned memory; it returns without waiting
// unless some row needs its logits on the host (penalties, logprobs, min_tokens masks). collect()
// waits for the oldest step's ids. So the host builds step N+1 while the device runs step N, and
// a decode step moves a few hundred bytes each way.
#include <algorithm>
#include <chrono>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_model_runner.h"
#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/projection.h"
#include "engine/backend/cuda/runner_kernels.h"
#include "engine/backend/cuda/sampling.h"
#include "engine/backend/cuda/sampling_topk_topp.h"
#include "engine/core/error.h"

namespace sparkglm::cuda {

template <typename Source>
void CudaModelRunner::patch_tokens(int rows, Source source, int32_t* pinned, DeviceBuffer& device,
                                   cudaEvent_t copied, const int32_t* picks) {
  // The previous submission's copy may still be queued: it must have read `pinned`.
  SPARKGLM_CUDA_CHECK(cudaEventSynchronize(copied));
  for (int r = 0; r < rows; ++r) pinned[r] = source(r);
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(device.data(), pinned, size_t(rows) * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, stream_));
  SPARKGLM_CUDA_CHECK(cudaEventRecord(copied, stream_));
  take_picked_tokens(static_cast<const int32_t*>(device.data()), picks, rows,
                     step_->tokens_to_patch(), stream_);
}

void CudaModelRunner::take_chain_tokens(const StepSampling& sampling, int rows) {
  SPARKGLM_ASSERT(chain_ && !queued_.empty() && queued_.back().chain_width > 0,
                  "StepSampling::chain_from: the previous step ran no chain");
  const int parity = queued_.back().parity;
  patch_tokens(
      rows,
      [&](int r) {
        const int32_t entry = sampling.chain_from[size_t(step_->batch_row(r))];
        return entry < 0 ? -1 : chain_->out_index(parity, entry);
      },
      pinned_chain_from_, chain_from_, chain_from_copied_, chain_->out());
}

void CudaModelRunner::submit(const ForwardBatch& batch, const StepSampling& sampling) {
  using Clock = std::chrono::steady_clock;
  submit_began_ = Clock::now();  // drafts_to_host times the steps that run their drafts
  SPARKGLM_ASSERT(queued_.size() < 2, "CudaModelRunner::submit: two steps are already queued");
  batch.validate(config_, options_.block_size, options_.num_blocks, options_.num_state_slots,
                 options_.num_snapshots, options_.state_records);
  const int64_t rows = batch.num_rows(), n = int64_t(batch.logit_rows.size());
  SPARKGLM_ASSERT(sampling.token_from.empty() || int64_t(sampling.token_from.size()) == rows,
                  "StepSampling::token_from must have one entry per row");
  SPARKGLM_ASSERT(sampling.chain_from.empty() || int64_t(sampling.chain_from.size()) == rows,
                  "StepSampling::chain_from must have one entry per row");
  // The previous step's main rows, before this step's graph can overwrite them.
  if (!queued_.empty()) take_main_rows(queued_.back());
  QueuedStep q;
  q.parity = next_parity_;
  q.logit_rows = n;
  if (rows > 0) {
    if (sampling.draft_on_picks) {
      SPARKGLM_CUDA_CHECK(cudaEventRecord(step_began_[q.parity], stream_));
      if (!queued_.empty() && queued_.back().drafts) q.follows = queued_.back().parity;
    }
    step_->load(batch, stream_);
    if (!sampling.token_from.empty())
      patch_tokens(
          int(rows), [&](int r) { return sampling.token_from[size_t(step_->batch_row(r))]; },
          pinned_from_, token_from_, from_copied_, static_cast<const int32_t*>(picks_.data()));
    if (!sampling.chain_from.empty()) take_chain_tokens(sampling, int(rows));
    step_loaded_ = Clock::now();
    step_drafts_ = drafts_fit(sampling);
    plan_chain(batch, sampling);
    chain_planned_ = Clock::now();
    try {
      if (step_drafts_) SPARKGLM_CUDA_CHECK(cudaEventRecord(run_began_[q.parity], stream_));
      run_step(batch);
      if (step_drafts_) SPARKGLM_CUDA_CHECK(cudaEventRecord(run_ended_[q.parity], stream_));
      step_launched_ = Clock::now();
    } catch (...) {
      step_drafts_ = false;
      throw;
    }
    if (step_drafts_) {  // the head and the picks ran with the layers: only copies are left
      step_drafts_ = false;
      drafts_to_host(q);
      next_parity_ ^= 1;
      queued_.push_back(std::move(q));
      return;
    }
    // Grammar masks: computed on the host now, while the device runs the layers just launched.
    masks_.upload(sampling, n, stream_);
    bool host_logits = false, draws = false;
    for (int64_t i = 0; i < n; ++i) {
      host_logits = host_logits || !sampling.picks(int(i));
      draws = draws || (sampling.picks(int(i)) && sampling.draws[size_t(i)].temperature != 0.0f);
    }
    if (draws) {
      // The previous submission's copy may still be queued: it must have read pinned_draws_.
      SPARKGLM_CUDA_CHECK(cudaEventSynchronize(draws_copied_));
      for (int64_t i = 0; i < n; ++i) {
        SampleParams p;  // temperature 0 (greedy) where the host picks: its token is unused
        if (sampling.picks(int(i))) {
          const RowDraw& d = sampling.draws[size_t(i)];
          p = {d.temperature, d.top_p, d.min_p, d.top_k, d.seed, d.index};
        } else {
          p.temperature = 0.0f;
        }
        pinned_draws_[i] = p;
      }
      SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(ws_.draws, pinned_draws_,
                                          size_t(n) * sizeof(SampleParams), cudaMemcpyHostToDevice,
                                          stream_));
      SPARKGLM_CUDA_CHECK(cudaEventRecord(draws_copied_, stream_));
    }
    head_picks(q.parity, host_logits ? &q.logits : nullptr, draws);
    // Rows whose logits come back (a speculative member's rows among them) bring their
    // head-reduced states too: the drafter reads them from StepResult::hidden.
    if (host_logits) hidden_to_host(ws_.y, q.hidden);
    if (!sampling.mtp_next.empty()) run_prompt_drafts(sampling, q);
  }
  main_handed_.reset();  // counted for drafting steps only (drafts_to_host)
  next_parity_ ^= 1;
  queued_.push_back(std::move(q));
}

void CudaModelRunner::collect(StepResult& result) {
  SPARKGLM_ASSERT(!queued_.empty(), "CudaModelRunner::collect: no step is queued");
  QueuedStep q = std::move(queued_.front());
  queued_.pop_front();
  if (q.drafts) return collect_drafts(q, result);
  const int32_t* picks = pinned_picks_[q.parity];
  SPARKGLM_CUDA_CHECK(cudaEventSynchronize(picks_copied_[q.parity]));  // the step has run
  result.tokens.assign(picks, picks + q.logit_rows);
  result.logits = std::move(q.logits);
  result.hidden = std::move(q.hidden);
  result.draft_tokens = std::move(q.draft_tokens);  // a prompt step's MTP rows, if it ran them
  result.draft_logits = std::move(q.draft_logits);
  result.draft_hidden = std::move(q.draft_hidden);
}

void CudaModelRunner::head_picks(int parity, std::vector<float>* logits, bool draws) {
  const int64_t n = int64_t(step_->logit_rows().size()), D = config_.hidden_size;
  const int64_t V = config_.vocab_size;
  if (logits) logits->resize(size_t(n * V));
  profile_.mark("head", stream_);
  auto* picks = static_cast<int32_t*>(picks_.data());
  for (int64_t c0 = 0; c0 < n; c0 += kLogitChunk) {
    const int64_t m = std::min<int64_t>(kLogitChunk, n - c0);
    gather_rows(ws_.y, step_->logit_rows_device() + c0, m, D, ws_.head_rows, stream_);
    rms_norm_rows(ws_.head_rows, weights_->weights().final_norm, config_.rms_norm_eps, m, D,
                  ws_.head_rows, ws_.head_bf16, stream_);
    project_decode(gemm_, weights_->weights().lm_head, ws_.head_bf16, m, ws_.logits, stream_);
    masks_.apply(ws_.logits, c0, m, V, stream_);  // forbidden tokens -> -inf before the picks
    if (draws) {
      sample_top_k_top_p(ws_.logits, m, V, ws_.draws + c0, ws_.sample_scratch, picks + c0, stream_);
    } else {
      sample_greedy(ws_.logits, m, V, picks + c0, stream_,
                    static_cast<unsigned long long*>(greedy_keys_.data()));
    }
    if (logits) {
      SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(pinned_logits_, ws_.logits, size_t(m * V) * 4,
                                          cudaMemcpyDeviceToHost, stream_));
      SPARKGLM_CUDA_CHECK(cudaStreamSynchronize(stream_));
      std::copy_n(pinned_logits_, size_t(m * V), logits->data() + c0 * V);
    }
  }
  SPARKGLM_CUDA_CHECK(cudaMemcpyAsync(pinned_picks_[parity], picks, size_t(n) * sizeof(int32_t),
                                      cudaMemcpyDeviceToHost, stream_));
  SPARKGLM_CUDA_CHECK(cudaEventRecord(picks_copied_[parity], stream_));
  profile_.end_step(stream_, step_->decode_rows() == step_->rows() ? "decode" : "prefill");
}

}  // namespace sparkglm::cuda
