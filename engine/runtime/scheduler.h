#pragma once
// Continuous batching. Each step admits waiting sequences while a state slot and enough KV blocks
// are free, then builds one batch: a decode row for every running sequence (up to max_batch_size)
// and prefill chunks up to max_prefill_tokens, mixed in one forward call.
//
// KV reservation: admission reserves blocks for the tokens a sequence has (the prompt, or prompt
// and output after a preemption) plus min(remaining max_tokens, reserve_output_tokens), not for
// the whole of max_tokens: a request without max_tokens gets the rest of the context window as its
// bound, and reserving all of it would let one request hold the pool. A running sequence takes one
// more block whenever its next decode position needs it. When the pool is empty at that point, the
// newest running sequence is preempted: its blocks and state slot are freed, it goes back to the
// front of the queue keeping its generated tokens, and when it is admitted again its prompt and
// output are prefilled anew (recompute; it sends no events meanwhile, and its later tokens may
// differ in the last bits from an unpreempted run, since prefill and decode sum differently).
// The oldest sequence is never preempted for a newer one, and any one request fits the pool
// alone (check_fits), so the oldest always progresses: no deadlock, no lost request. Admission
// keeps one free block per running sequence as headroom, so that a sequence just admitted is not
// preempted at the next step. A request that cannot fit even in an empty pool is refused at
// submission.
//
// Prefill is split only at absolute positions that are multiples of `prefill_align` (the KDA chunk
// size), so a prompt's arithmetic does not depend on how the prefill budget was shared: greedy
// output at concurrency 4 equals greedy output alone, bitwise. The budget is shared: every
// prefilling sequence is offered an equal share of it (whole chunks) before the rest goes in
// arrival order, so a short prompt behind a long one gets its first token after a few steps, not
// after the whole long prefill (prefill_grants;
// SchedulerTest.AShortPromptBehindALongOneGetsItsFirstTokenFirst).
//
// Prefix caching (limits.prefix_caching; engine/runtime/prefix_cache.h): admission asks the cache
// for the longest cached prefix with both its blocks and a KDA snapshot, takes those blocks by
// reference (they count toward the reservation) and starts the sequence's prefill after them,
// from the restored snapshot. Prefill slices also end at the cache's snapshot save points, which
// lie on the chunk grid, so the arithmetic stays the same as above. A request that finishes by
// stop or length leaves an answer sequence (prefix_cache.h: Answers) in `answers_`. Admitted only
// while no request runs or waits, and only if its blocks fit at once (it is dropped otherwise,
// when preempted, and when a request arrives while it runs), it prefills the conversation up to
// its last grid point from the prompt's snapshot, one chunk a step, and ends without an event. At
// most max_num_seqs of them wait; the oldest goes first.
//
// Pipelining: a step is submitted to the runner and collected one step later, so the host builds
// and submits step N+1 while the device runs step N. That needs step N's tokens before the host
// has them: where every token of step N is a plain pick (SequenceSampler::plain_greedy_at, or
// plain_draw_at on a runner that draws_sampled(): seeded draws without penalties or logprobs),
// the runner picks it and step N+1's row reads it on the device (StepSampling::token_from). A
// sequence whose pending token must end it by length gets no row; one that draws a stop token
// has spent one wasted row, whose result is dropped. Otherwise (host sampling, penalties,
// logprobs, min_tokens masks, or a preemption to make) step N is collected before step N+1 is
// built, as without pipelining. Either way every sequence sees the tokens it would see unpipelined.
//
// Speculative decoding (limits.speculative_tokens > 0; engine/runtime/speculation/speculator.h):
// a decode slice carries the sequence's drafts as extra rows (a verify slice), its step is
// collected before the next is built, and the speculator commits the accepted prefix, rolls the
// rest back and drafts again; a step that chains its drafts is committed from its main rows
// instead, and the next one built while its MTP passes run (speculator.h, commit_early). A verify
// slice needs k more blocks than a decode row; it takes them only from blocks no running sequence
// may need, so the preemption rule above is unchanged.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"
#include "engine/runtime/generation_request.h"
#include "engine/runtime/prefix_cache.h"
#include "engine/runtime/sequence.h"
#include "engine/runtime/speculation/speculative_rollback.h"
#include "engine/runtime/speculation/speculator.h"

namespace sparkglm {

// The first four are `sparkglm-serve` options (--max-num-seqs, --max-batch-size,
// --max-prefill-tokens, --max-seq-len): the registry (engine/options/serving_options.cpp) takes its
// defaults from these, so the two cannot disagree. The last two are the engine's own constants,
// not options; tests change them.
struct SchedulerLimits {
  int max_num_seqs = 4;           // sequences admitted at once (at most the runner's state slots)
  int max_batch_size = 4;         // decode rows per step (the registry's 0 = max_num_seqs)
  int max_prefill_tokens = 8192;  // prefill rows per step
  int max_seq_len = 4096;         // prompt + output tokens (the registry's 0 = the model's window)
  int prefill_align = 64;         // prefill splits land on multiples of this (the KDA chunk)
  int reserve_output_tokens = 256;  // output tokens reserved at admission (see above)
  // --enable-prefix-caching: needs a runner with KDA snapshots (CacheGeometry::num_snapshots).
  bool prefix_caching = false;
  int snapshot_every_chunks = 0;  // also snapshot every this many chunks of a prefill (0: off)
  uint64_t cache_identity = 0;    // PrefixCache::identity of the model and precision
  // The disk tier: --prefix-cache-dir, and --prefix-cache-gb in bytes (0: no disk tier).
  std::string prefix_cache_dir = {};
  uint64_t prefix_cache_bytes = 0;
  // --speculative-tokens: drafts verified per sequence and step (0: off; at most
  // kMaxSpeculativeTokens). Needs a model with an MTP module (or a drafter given to the
  // Scheduler) and a runner with the KDA state records its rollback needs
  // (speculative_state_records: k + 1 rows per slot for records, 1 for recompute;
  // CacheGeometry::state_records).
  int speculative_tokens = 0;
  // --speculative-rollback (speculative_rollback.h).
  SpeculativeRollback speculative_rollback = SpeculativeRollback::kRecords;
  // Verify steps run the MTP drafter's first forward inside them (StepSampling::draft_on_picks).
  // Not an option: off only to measure it (bench/speculation_bench --draft-in-step off).
  bool speculative_draft_in_step = true;
  // And the drafter's later chained passes too (StepSampling::draft_chain). Not an option
  // either: off only to measure it (speculation_bench --chain-in-step off).
  bool speculative_chain_in_step = true;
  // Verify steps of at most this many slices take those chains (kMaxChainedSlices says why 8).
  // Not an option: other values only to measure them (speculation_bench --chain-slices N).
  int speculative_chain_slices = kMaxChainedSlices;
  // Error(kInvalidArgument) naming the option of a bad user limit; a bad engine constant
  // (prefill_align, reserve_output_tokens) is a defect and asserts.
  void validate(const CacheGeometry& g) const;
};

// Seconds the engine thread spent, summed over steps, inside the runner's submit (building the
// step's inputs and launching it), inside its collect (mostly waiting for the device), and in the
// speculator's draft (the drafter's own forwards and their waits). The rest of a step's time is
// the scheduler's own host work.
struct StepHostTimes {
  double submit_seconds = 0, collect_seconds = 0, draft_seconds = 0;
};

struct SchedulerCounters {
  uint64_t steps = 0, prompt_tokens = 0, generated_tokens = 0, finished = 0, preemptions = 0;
  uint64_t prefix_hits = 0, prefix_hit_tokens = 0;  // admissions that resumed from the cache
  uint64_t block_evictions = 0;                     // cached blocks reused for new ones
  uint64_t snapshots_saved = 0, snapshot_evictions = 0;
  PrefixCacheCounters prefix;  // all of the cache's counters (answers, the disk tier)
  double last_step_seconds = 0, total_step_seconds = 0;
  StepHostTimes host;  // where the engine thread's time went (bench/speculation_bench reports it)
  SpeculationCounters speculation;
};

class Scheduler {
 public:
  // drafter: what proposes drafts when limits.speculative_tokens > 0 (null: the MTP module).
  Scheduler(ModelRunner& runner, const SchedulerLimits& limits,
            std::unique_ptr<Drafter> drafter = nullptr);

  // Error(kCapacity) when the request can never fit; Error(kInvalidArgument) for an empty prompt
  // or tokens outside the vocabulary.
  void check_fits(const GenerationRequest& r) const;
  void add(std::shared_ptr<RequestHandle> handle, GenerationRequest request);
  bool idle() const {
    return waiting_.empty() && running_.empty() && queued_.empty() && answers_.empty();
  }
  // One engine step: submits the next step and collects the one before it; returns false when
  // there was nothing to do.
  bool step();
  // Finishes every request with `reason` (shutdown; a device fault, with `error` saying why).
  // step() throws an Error of kind kDeviceFatal on instead of failing the step's requests: the
  // caller then calls this.
  void cancel_all(FinishReason reason, const std::string& error = "");

  int waiting() const { return int(waiting_.size()); }
  int running() const { return int(running_.size()); }
  const BlockAllocator& blocks() const { return blocks_; }
  SchedulerCounters counters() const;  // with the prefix cache's counters filled in
  const PrefixCache* prefix_cache() const { return cache_.get(); }
  const SchedulerLimits& limits() const { return limits_; }
  const CacheGeometry& geometry() const { return geometry_; }

 private:
  using Clock = std::chrono::steady_clock;
  // A step submitted to the runner and not yet collected.
  struct QueuedStep {
    std::vector<Sequence*> members;
    std::vector<int> rows;        // per member
    std::vector<int> logit_row;   // per member: its logit row, or -1 (a prefill chunk mid-prompt)
    std::vector<uint8_t> picked;  // per member: the runner picks its token
    std::vector<SpecRole> role;   // per member: its part in speculation (logit rows: all rows,
                                  // or with prompt_drafts the last where it samples or drafts)
    bool prompt_drafts = false;   // the step runs the MTP module over its prompt rows (mtp_next)
    bool all_picked = true;       // every member with a logit row is picked
    // The verify step pipelined (speculator.h): its main rows may be committed before its
    // drafts arrive (early), and were (committed: the next step may be built before it is
    // collected); main holds what ModelRunner::collect_main returned.
    bool early = false, committed = false;
    StepResult main;
    // Members that finished while queued: kept alive until the step is collected.
    std::vector<std::unique_ptr<Sequence>> retired;
    Clock::time_point submitted;
  };
  int blocks_for(const Sequence& s) const;  // what admission reserves
  void admit();
  // Admits the front of `queue` if a slot and its blocks are free; false (nothing taken) if not.
  bool admit_front(std::deque<std::unique_ptr<Sequence>>& queue);
  // A request finished by stop or length: queues its answer sequence when it would add a hit.
  void queue_answer(const Sequence& s);
  // True when some decoding sequence's next position needs a block and the pool has too few.
  bool needs_preemption() const;
  // Gives every decoding sequence the block its next position needs, preempting the newest
  // running sequences while the pool is empty.
  void grow_or_preempt();
  void preempt(std::unique_ptr<Sequence> s);
  // Frees the blocks and state slot of `s` (finished or preempted).
  void release(Sequence& s);
  void finish(Sequence& s, FinishReason reason, const std::string& error = "");
  void reap_cancelled();
  // Removes finished sequences from running_; those still in a queued step wait in its retired.
  void drop_finished();
  // Builds the next step's batch from the running sequences (empty when there is nothing to run).
  QueuedStep build_step(ForwardBatch& batch, StepSampling& sampling);
  // Each prefilling running sequence (running_ order) and the prefill tokens it may take this
  // step: an equal share of max_prefill_tokens first, then the rest in order.
  std::vector<std::pair<Sequence*, int>> prefill_grants() const;
  // Collects the oldest queued step and reports its tokens.
  void collect_oldest();
  // The newest queued step, early: commits its members from its main rows, or collects it.
  void commit_early();
  // Reports the next token of `s`; may finish `s`.
  void emit_token(Sequence& s, const SampledToken& t);

  ModelRunner& runner_;
  SchedulerLimits limits_;
  CacheGeometry geometry_;
  BlockAllocator blocks_;
  std::vector<int> free_slots_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  std::deque<std::unique_ptr<Sequence>> answers_;   // answer sequences not yet admitted
  std::deque<QueuedStep> queued_;  // at most two, between a submit and the collect after it
  Clock::time_point last_collect_{};
  size_t decode_cursor_ = 0;  // rotates decode rows when more sequences run than max_batch_size
  uint64_t next_seed_ = 0x5eedf00d;
  SchedulerCounters counters_;
  std::unique_ptr<PrefixCache> cache_;  // null unless limits.prefix_caching
  std::unique_ptr<Speculator> spec_;    // null unless limits.speculative_tokens > 0
};

}  // namespace sparkglm
