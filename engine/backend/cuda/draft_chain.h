#pragma once
// Chained drafts inside a verify step (StepSampling::draft_chain; docs/speculative-decoding.md).
// After the step's MTP pass over every verify row (run_draft_rows), the device finds each
// slice's accepted row by the greedy rule (a draft is accepted while the main model's pick at the
// row before it is that draft), and runs the MTP module's later passes from that row alone: one
// row per slice, on the draft the previous pass picked and the module's own output state, one
// position on each pass, as MtpDrafter's own chained forwards do. The host then finds a whole
// chain of drafts in the step's results instead of running a forward per draft and waiting for
// each.
//
// The chain's rows are a step of their own (a StepInputs the runner swaps in for the passes):
// one decode row per slice, laid out on the host at the furthest position its chain can reach
// (so the attention's buckets bound every pass), and moved to each pass's position on the device.
// A slice whose chain positions straddle the indexer's dense/sparse edge, or whose block table
// does not reach the furthest position, leaves the whole step without a chain (plan()).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/norms.h"
#include "engine/backend/cuda/runner_buffers.h"
#include "engine/backend/cuda/step_inputs.h"
#include "engine/model/forward_batch.h"

namespace sparkglm::cuda {

class DraftChain {
 public:
  // Its device arrays are the workspace's chain_* (kDecodeMaxRows rows); max_width: drafts per
  // chain at most.
  DraftChain(const Workspace& ws, int max_width, int64_t hidden, int64_t vocab);
  ~DraftChain();
  DraftChain(const DraftChain&) = delete;
  DraftChain& operator=(const DraftChain&) = delete;

  // For the verify step `batch` laid out in `verify` (every slice a decode slice, every row a
  // logit row), `passes` chained passes: lays the chain's rows out into `chain` and starts their
  // copies on `stream`. False (nothing loaded) when some slice cannot take them (see above).
  bool plan(const ForwardBatch& batch, const StepInputs& verify, int passes, StepInputs& chain,
            cudaStream_t stream);
  void clear() { passes_ = rows_ = 0; }  // the next step runs no chain
  int passes() const { return passes_; }
  int rows() const { return rows_; }
  int width() const { return passes_ + 1; }

  // The launches, in the verify step's stream order (captured with it). begin(): after the
  // step's MTP pass (main_picks: the main model's greedy pick per verify row; draft_logits and z:
  // the pass's logits and output state per verify row, [rows, vocab] and [rows, D]): finds each
  // slice's accepted row, picks its first draft, moves the chain's rows to their first pass
  // (tokens, positions, lengths, page rows of `chain`) and writes that pass's input (`next`: the
  // runner's mtp_entry(), whose cat must not overlap z, read in place) in the same launch, as
  // mtp_entry_bf16 would on the rows' drafts and their accepted rows' z. The picks are
  // sample_greedy's; a vocabulary of one greedy block (kGreedyBlockVocab) is scanned inside begin
  // and advance themselves, one launch fewer each.
  void begin(const StepInputs& verify, const int32_t* main_picks, const float* draft_logits,
             const float* z, StepInputs& chain, int block_size, cudaStream_t stream,
             unsigned long long* greedy_keys, const MtpEntry& next);
  // After pass `pass` (1-based) of the chain: its logits [rows, vocab] and output state z
  // [rows, D]: records each row's pick and, unless it was the last pass, moves the rows one
  // position on with the pick as their token and writes the next pass's input from them and z
  // as begin does.
  void advance(int pass, const float* logits, const float* z, StepInputs& chain, int block_size,
               cudaStream_t stream, unsigned long long* greedy_keys, const MtpEntry& next);
  float* logits() const { return logits_; }  // a pass's logits [rows, vocab]

  // Queues the copy of the chains to pinned memory for `parity` (the runner's queued step; the
  // next step's plan() may run before it is collected), then (after the stream is waited for)
  // spreads them by logit row: [logit rows, width] (-1 where no chain is), the layout of
  // StepResult::draft_chain.
  void to_host(cudaStream_t stream, int parity);
  void spread(int parity, int64_t logit_rows, std::vector<int32_t>& draft_chain) const;
  // Where entry `entry` of the draft_chain that spread(parity) gives lies in out() (the chains of
  // the step last run), for StepSampling::chain_from: valid until the next step's begin().
  int32_t out_index(int parity, int32_t entry) const;
  const int32_t* out() const { return out_; }

 private:
  int max_rows_, max_width_;
  int64_t hidden_, vocab_;
  int passes_ = 0, rows_ = 0;
  // Per chain row (chain step order): its slice's map (verify rows, then their verify step rows),
  // and out (the accepted row, then the chain), kChainStride words each.
  std::vector<int32_t> first_logit_;  // per chain row: the slice's first logit row
  float* logits_ = nullptr;
  int32_t *map_ = nullptr, *first_picks_ = nullptr, *picks_ = nullptr, *out_ = nullptr;
  std::vector<int32_t> map_host_;  // the map of the step planned last, before its transfer
  // The next pass's input fits a launch that reads z [z_rows, D] in place.
  void check_entry(const MtpEntry& next, const float* z, int64_t z_rows) const;
  // Per parity (to_host): the chains' copy and what spreading them needs.
  int32_t* pinned_out_[2] = {};
  std::vector<int32_t> copied_first_logit_[2];
  int copied_width_[2] = {0, 0};
};

}  // namespace sparkglm::cuda
