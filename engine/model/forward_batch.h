#pragma once
// One engine step: a flattened batch of token rows from several sequences (the interface the
// scheduler calls). Rows of one sequence are contiguous and in position order; its first row sits
// at `start_position`, the number of its tokens already in the caches.
#include <cstdint>
#include <vector>

#include "engine/model/config.h"

namespace sparkglm {

struct SequenceSlice {
  int32_t first_row = 0;       // index of the sequence's first row in the batch
  int32_t num_rows = 0;        // rows this step (a prefill chunk, or 1 for decode)
  int32_t start_position = 0;  // absolute position of the first row; 0 starts a new sequence
  int32_t state_slot = 0;      // KDA state slot (zeroed by the forward when start_position is 0)
  // A generated token's row (decode kernels, the token-by-token KDA recurrence), or a piece of a
  // prompt (prefill kernels, the chunked KDA form), whatever its length: a prompt cut by the
  // prefill budget may leave a one-row piece, which must still compute what the same row computes
  // inside a longer piece (batch invariance). add_sequence sets it for one-row slices; the
  // scheduler clears it for one-row prompt pieces.
  bool decode = false;
  std::vector<int32_t> block_table;  // latent-cache blocks covering [0, start_position + num_rows)
  // KDA state snapshots (the prefix cache, engine/runtime/prefix_cache.h), in step order: before
  // the step's rows run, snapshot `restore_snapshot` is copied into the state slot (the sequence
  // resumes at start_position > 0); after they ran, the slot is copied into `save_snapshot`.
  // -1: none. Restores of a step run before its saves, so a step may save into a snapshot that
  // one of its own slices restores from.
  int32_t restore_snapshot = -1;
  int32_t save_snapshot = -1;
  // Speculative decoding (engine/runtime/speculation/): a verify slice is a decode slice of
  // several rows (each row computes what a one-row decode slice at its position computes) that
  // records the KDA state after each of its rows (KdaStatePool state records, at most
  // CacheGeometry::state_records rows). resume_record >= 0: before the rows run, the slot's state
  // becomes its record after row resume_record of the last recording step (the last accepted
  // row), rolling back the rejected ones. -1: none.
  // record_before_row >= 0 (rollback by recompute, speculative_rollback.h) instead keeps one
  // record: the state and conv history just before that row runs (after the rows before it,
  // replayed ones), in record 0, which a later slice resumes from (resume_record 0) to run the
  // accepted rows again. A decode slice of several rows records one way or the other.
  bool record_states = false;
  int32_t record_before_row = -1;
  int32_t resume_record = -1;
};

struct ForwardBatch {
  std::vector<int32_t> tokens;     // [T]
  std::vector<int32_t> positions;  // [T] absolute positions
  std::vector<int32_t> row_seq;    // [T] index into seqs
  std::vector<SequenceSlice> seqs;
  std::vector<int32_t> logit_rows;  // rows whose logits (and final hidden state) are returned

  int32_t num_rows() const { return int32_t(tokens.size()); }
  // Appends one sequence's rows; with want_logits, its last row is added to logit_rows
  // (all_logits: every row).
  void add_sequence(const std::vector<int32_t>& seq_tokens, int32_t start_position,
                    int32_t state_slot, std::vector<int32_t> block_table, bool want_logits = true,
                    bool all_logits = false);
  // Throws Error(kInvalidArgument) on inconsistent rows, positions, slots, snapshots or block
  // tables.
  void validate(const ModelConfig& config, int block_size, int num_blocks, int num_slots,
                int num_snapshots = 0, int state_records = 0) const;
};

struct ForwardOutput {
  std::vector<float> logits;  // [logit_rows, vocab]
  std::vector<float> hidden;  // [logit_rows, D]: h after the head reduction, before the final norm
};

}  // namespace sparkglm
