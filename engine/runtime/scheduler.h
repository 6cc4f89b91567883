#pragma once
// Continuous batching. Each step admits waiting sequences while a state slot and enough KV blocks
// are free, then builds one batch: a decode row for every running sequence (up to max_batch_size)
// and prefill chunks up to max_prefill_tokens, mixed in one forward call.
//
// Admission reserves the blocks for the whole request (prompt + max_tokens), so a running
// sequence never waits for memory and nothing is preempted; a request that cannot fit even in an
// empty pool is refused at submission.
//
// Prefill is split only at absolute positions that are multiples of `prefill_align` (the KDA chunk
// size), so a prompt's arithmetic does not depend on how the prefill budget was shared: greedy
// output at concurrency 4 equals greedy output alone, bitwise.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"
#include "engine/runtime/generation_request.h"
#include "engine/runtime/sequence.h"

namespace sparkglm {

struct SchedulerLimits {
  int max_num_seqs = 4;          // sequences admitted at once (at most the runner's state slots)
  int max_batch_size = 4;        // decode rows per step
  int max_prefill_tokens = 512;  // prefill rows per step
  int max_seq_len = 4096;        // prompt + output tokens of one request
  int prefill_align = 64;        // prefill splits land on multiples of this
  void validate(const CacheGeometry& g) const;  // Error(kInvalidArgument) naming the limit
};

struct SchedulerCounters {
  uint64_t steps = 0, prompt_tokens = 0, generated_tokens = 0, finished = 0;
  double last_step_seconds = 0, total_step_seconds = 0;
};

class Scheduler {
 public:
  Scheduler(ModelRunner& runner, const SchedulerLimits& limits);

  // Error(kCapacity) when the request can never fit; Error(kInvalidArgument) for an empty prompt
  // or tokens outside the vocabulary.
  void check_fits(const GenerationRequest& r) const;
  void add(std::shared_ptr<RequestHandle> handle, GenerationRequest request);
  bool idle() const { return waiting_.empty() && running_.empty(); }
  // One engine step; returns false when there was nothing to do.
  bool step();
  // Finishes every request with `reason` (shutdown).
  void cancel_all(FinishReason reason);

  int waiting() const { return int(waiting_.size()); }
  int running() const { return int(running_.size()); }
  const BlockAllocator& blocks() const { return blocks_; }
  const SchedulerCounters& counters() const { return counters_; }
  const SchedulerLimits& limits() const { return limits_; }
  const CacheGeometry& geometry() const { return geometry_; }

 private:
  int blocks_for(const Sequence& s) const;
  void admit();
  void finish(Sequence& s, FinishReason reason, const std::string& error = "");
  void reap_cancelled();
  // Samples the next token of `s` from `logits` and reports it; may finish `s`.
  void emit_token(Sequence& s, const float* logits);

  ModelRunner& runner_;
  SchedulerLimits limits_;
  CacheGeometry geometry_;
  BlockAllocator blocks_;
  std::vector<int> free_slots_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  size_t decode_cursor_ = 0;  // rotates decode rows when more sequences run than max_batch_size
  uint64_t next_seed_ = 0x5eedf00d;
  SchedulerCounters counters_;
};

}  // namespace sparkglm
