#pragma once
// What a backend offers the scheduler: one forward call over a flattened batch whose rows are
// independent (a row's results never depend on which other rows share the batch).
#include <vector>

#include "engine/model/config.h"
#include "engine/model/forward_batch.h"

namespace sparkglm {

// The caches a runner was built with: what the scheduler may hand out.
struct CacheGeometry {
  int num_blocks = 0;       // latent-cache blocks
  int block_size = 0;       // tokens per block
  int num_state_slots = 0;  // KDA state slots (sequences in flight)
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
};

}  // namespace sparkglm
