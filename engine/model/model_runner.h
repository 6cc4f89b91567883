#pragma once
// What a backend offers the scheduler: one forward call over a flattened batch whose rows are
// independent (a row's results never depend on which other rows share the batch), and the same
// step pipelined (submit, then collect) so the scheduler can prepare step N+1 while N runs.
#include <deque>
#include <utility>
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
  // batch.logit_rows. State slots are not touched.
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

 private:
  std::deque<std::pair<ForwardBatch, StepSampling>> queued_;
  std::vector<int32_t> last_tokens_;  // the picks of the last step run (for token_from)
};

}  // namespace sparkglm
