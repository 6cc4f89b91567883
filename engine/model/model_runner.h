#pragma once
// What a backend offers the scheduler: one forward call over a flattened batch whose rows are
// independent (a row's results never depend on which other rows share the batch), and the same
// step pipelined (submit, then collect) so the scheduler can prepare step N+1 while N runs.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/forward_batch.h"
#include "engine/model/step_sampling.h"

namespace sparkglm {

// The caches a runner was built with: what the scheduler may hand out.
struct CacheGeometry {
  int num_blocks = 0;       // latent-cache blocks
  int block_size = 0;       // tokens per block
  int num_state_slots = 0;  // KDA state slots (sequences in flight)
  int num_snapshots = 0;    // KDA state snapshots beside them (SequenceSlice::save_snapshot)
  int state_records = 0;    // rows per slot whose KDA state a verify slice records (0: none)
};

// A device backend's captured step graphs (ModelRunner::graph_stats): what was captured, how
// often steps ran through them, and what the captures took.
struct StepGraphStats {
  bool built_with_graphs = false;   // false: --enforce-eager, or a backend without graphs
  bool eager_now = false;           // set_eager(true) is in force
  int decode_graphs = 0;            // captured plain decode steps (one per key)
  int verify_graphs = 0;            // captured verify steps (speculative decoding)
  uint64_t decode_graph_steps = 0;  // steps launched as a decode graph (the capture included)
  uint64_t verify_graph_steps = 0;  // steps launched as a verify graph (the capture included)
  uint64_t verify_eager_steps =
      0;                         // speculative steps run eagerly (not graphable, or over the cap)
  int mtp_graphs = 0;            // captured MTP module passes (forward_mtp over decode rows)
  uint64_t mtp_graph_steps = 0;  // forward_mtp calls launched as a graph (the capture included)
  uint64_t mtp_eager_steps = 0;  // graphable MTP passes run eagerly: a new shape over the cap
  size_t graph_bytes = 0;  // device memory the captures took (free memory before - after each)
};

// Where the time of the steps that bring their drafts back went (StepSampling::draft_on_picks,
// ModelRunner::draft_step_times), on a runner that times them (the CUDA runner; events on the
// device). Such a step's wall time less its device time is the device's idle time, which
// pipelined decode steps hide and these steps, waiting for their drafts, do not.
struct DraftStepTimes {
  uint64_t steps = 0;
  double host_seconds = 0;    // the host inside submit, besides the wait
  double wait_seconds = 0;    // the host waiting for the device
  double device_seconds = 0;  // the device from the step's first input copy to its last output copy
  double run_seconds = 0;     // of which the step proper: layers, head, MTP passes (no copies)
  // Of run_seconds, from the step proper's start on the stream (after the state copies queued
  // before it) to its graph's first node on the device: mostly the device waiting for the host's
  // graph launch (about 0 when eager).
  double lag_seconds = 0;
  // Of run_seconds, from the step proper's start to its main rows reaching pinned memory (the
  // event the host waits on before committing the step from them, ModelRunner::collect_main); the
  // rest of run_seconds is the MTP passes after them.
  double main_seconds = 0;
  // Of host_seconds, before the device can run the step proper: checking and packing the step
  // and its input copies (load), the drafts' checks and the chain's plan (plan), and the state
  // copies and the graph launch (launch).
  double load_seconds = 0, plan_seconds = 0, launch_seconds = 0;
  // Between a drafting step and the next, submitted while it still ran (the verify step
  // pipelined, collect_main): from the earlier step's last copy to the later one's first input
  // copy on the stream, the device waiting for the host to begin the later step's submit (0 when
  // the host began it before the device got there). Not counted outside such pairs.
  double idle_seconds = 0;
  // Between the same pairs, on the host: from the earlier step's main rows reaching it
  // (collect_main) to the later step's submit, the scheduler committing the one and building the
  // other while the device runs the earlier step's MTP passes.
  double between_seconds = 0;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  virtual CacheGeometry cache_geometry() const = 0;

  // Runs the main model over the batch: writes each row's latent/indexer cache entries and advances
  // each sequence's KDA state; returns logits and final hidden states for batch.logit_rows.
  virtual void forward(const ForwardBatch& batch, ForwardOutput& out) = 0;

  // The MTP module (MODEL.md section 6). Row r of `batch` carries the next token t_{i+1} at
  // position i of its sequence; hidden[r] is h_i, the main model's head-reduced state at i
  // ([T, D]). Writes the MTP layer's own cache at position i and returns draft logits for
  // batch.logit_rows. State slots are not touched. Speculative decoding's drafter
  // (runtime/speculation/mtp_drafter.h) calls it between steps, with no step queued.
  virtual void forward_mtp(const ForwardBatch& batch, const std::vector<float>& hidden,
                           ForwardOutput& out) = 0;

  // Pipelined steps. submit() queues a step and may return before it has run; collect() returns
  // the oldest queued step's result, waiting for it. Steps run in submission order, each seeing
  // the caches as every earlier step left them, so a caller may free or reuse blocks and state
  // slots of a finished sequence while a step that still writes them is queued: later steps run
  // after it. At most two steps are queued; forward() is only called with none queued.
  // The default runs each step inside collect() through forward() and picks greedy tokens on the
  // host; a device backend overrides both to run on its stream and pick tokens on the device
  // (draws_sampled(): seeded draws too, so sampled rows need not bring their logits back).
  // Either throws what forward() throws, from whichever call ran the step.
  virtual void submit(const ForwardBatch& batch, const StepSampling& sampling);
  virtual void collect(StepResult& result);
  virtual bool draws_sampled() const { return false; }
  // A verify step's main rows before its drafts (docs/speculative-decoding.md, "The verify step
  // pipelined"). For the step just submitted, with StepSampling::draft_chain > 0: waits until
  // its main model's rows are on the host and moves them into `main` (tokens, logits, hidden,
  // draft_tokens, and draft_chain_width), while the device goes on with the MTP passes. The
  // caller may then build and submit the next step, whose draft rows take the chain's tokens
  // (StepSampling::chain_from); the step's collect() returns the rest (draft_chain; the CPU's
  // default pipeline also its draft_logits and draft_hidden, which a chaining CUDA step does
  // not copy back), leaving what collect_main() moved out empty. A runner that ran the step
  // without its drafts (a device's row limit) moves nothing and says draft_chain_width 0: the
  // step is collected whole. Only where main_rows_early(); the default pipeline's is for runners
  // that keep it (CpuModelRunner).
  virtual bool main_rows_early() const { return false; }
  virtual void collect_main(StepResult& main);
  // Whether submit() runs StepSampling::mtp_next (the MTP module over a prompt's rows inside the
  // step). The default pipeline does, through forward() over every row and forward_mtp().
  virtual bool drafts_over_prompts() const { return true; }

  // Captured step graphs. set_eager(true) runs later steps without them (as --enforce-eager does
  // from the start), set_eager(false) with them again; graphs already captured are kept. Returns
  // whether the runner was built with graphs (false: the call changes nothing). A bench times
  // graphed and eager steps in one process with it.
  virtual bool set_eager(bool eager) {
    (void)eager;
    return false;
  }
  virtual StepGraphStats graph_stats() const { return {}; }
  virtual DraftStepTimes draft_step_times() const { return {}; }

  // Host copies of cache contents: the prefix cache's disk tier (engine/runtime/prefix_store.h)
  // spills evicted blocks and snapshots through them and restores them the same way. A block is
  // one latent-cache block of every MLA layer (the MTP layer's too): latents, indexer keys and
  // gates in the pool's dtype; a snapshot is one KDA snapshot: every KDA layer's recurrent state
  // and conv history. The layout is the runner's own; only the same runner reads it back.
  // Each copy runs after every step submitted before it and before any step submitted after it,
  // and returns once `host` (host_block_bytes() or host_snapshot_bytes() long) is written (to
  // host) or may be reused (from host): it waits for the queued steps. A runner without these
  // copies returns 0 from host_block_bytes(), and the copies are never called on it.
  virtual size_t host_block_bytes() const { return 0; }
  virtual size_t host_snapshot_bytes() const { return 0; }
  virtual void copy_block_to_host(int32_t block, std::byte* host);
  virtual void copy_block_from_host(int32_t block, const std::byte* host);
  virtual void copy_snapshot_to_host(int snapshot, std::byte* host);
  virtual void copy_snapshot_from_host(int snapshot, const std::byte* host);

 protected:
  // Runs now every step the default submit() queued and has not run, keeping each result (or
  // what it threw) for its collect(): a host copy then sees the caches as those steps left them.
  // Stops at a step that throws; the steps after it run in their own collect() as before.
  void run_queued();

 private:
  struct QueuedStep {
    ForwardBatch batch;
    StepSampling sampling;
    bool ran = false;
    StepResult result;
    std::exception_ptr failure;
    bool main_taken = false;  // collect_main() moved the main rows out
  };
  void run(QueuedStep& q);  // step() into q, keeping what it throws
  // One step of the default pipeline: token_from, forward(), greedy picks on the host.
  void step(ForwardBatch& batch, const StepSampling& sampling, StepResult& result);
  // StepSampling::draft_on_picks for the default pipeline: forward_mtp over the step's rows on the
  // greedy picks of `out`; leaves `result`'s draft rows empty when the batch does not qualify.
  void draft_on_picks(const ForwardBatch& batch, const ForwardOutput& out, StepResult& result);
  // StepSampling::mtp_next for the default pipeline: forward() with every row a logit row (the
  // hidden states forward_mtp needs), then forward_mtp over the same slices on mtp_next's tokens
  // (the greedy pick where it says -1); `out` gets the batch's own logit rows.
  void forward_with_prompt_drafts(const ForwardBatch& batch, const std::vector<int32_t>& next,
                                  ForwardOutput& out, StepResult& result);
  // StepSampling::draft_chain after it: each slice's accepted row by the greedy rule, then
  // `passes` one-row forward_mtp calls from it (the drafter's own chained passes, made here as the
  // CUDA runner makes them inside its step); none when a block table does not reach them.
  void draft_chain(const ForwardBatch& batch, int passes, StepResult& result);
  std::deque<QueuedStep> queued_;
  std::vector<int32_t> last_tokens_;  // the picks of the last step run (for token_from)
  std::vector<int32_t> last_chain_;   // and its draft chains (for chain_from)
};

}  // namespace sparkglm
