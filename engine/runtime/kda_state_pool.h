#pragma once
// Per-sequence KDA state in slots: for each KDA layer the FP32 recurrent state S (one K x V matrix
// per head) and the short-convolution history of q, k and v (the last taps - 1 inputs, oldest
// first).
//
// Snapshots (the prefix cache's, engine/runtime/prefix_cache.h) are whole-slot copies kept beside
// the slots: save() copies a slot's state and history of every KDA layer into a snapshot,
// restore() copies one back into a slot.
//
// State records (speculative decoding, engine/runtime/speculation/): a verify step runs several
// rows of one sequence token by token and may reject the later ones. With `state_records` rows per
// slot, the forward of a recording slice keeps the state and history after each of its rows
// (record_state / record_conv), and rewind() later copies the record of the last accepted row
// back into the slot: exact rollback without recomputing. A step's records replace the last ones.
// Rollback by recompute keeps one record, the state before a verify slice's first new row, and
// rewinds to it before the accepted rows run again.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/config.h"

namespace sparkglm {

class KdaStatePool {
 public:
  KdaStatePool(const ModelConfig& config, int num_slots, int num_snapshots = 0,
               int state_records = 0);

  int num_slots() const { return num_slots_; }
  int64_t state_floats() const { return state_floats_; }  // per slot per layer: H * K * V
  int64_t conv_floats() const { return conv_floats_; }    // per slot per layer: 3 * (taps-1) * H*K

  float* state(int slot, int kda_layer) {  // [H, K, V]: S[h][i][j], i over keys, j over values
    return &state_[(size_t(slot) * size_t(num_layers_) + size_t(kda_layer)) *
                   size_t(state_floats_)];
  }
  // [3 (q, k, v)][taps - 1][H * K]; the last entry is the most recent input.
  float* conv(int slot, int kda_layer) {
    return &conv_[(size_t(slot) * size_t(num_layers_) + size_t(kda_layer)) * size_t(conv_floats_)];
  }
  void reset(int slot);  // zeros the slot's state and history
  int num_snapshots() const { return num_snapshots_; }
  void save(int slot, int snapshot);     // slot -> snapshot, every layer
  void restore(int snapshot, int slot);  // snapshot -> slot, every layer
  // One snapshot as bytes (snapshot_bytes long): every layer's state, then every layer's conv
  // history, FP32. The prefix cache's disk tier keeps snapshots in this form.
  static size_t snapshot_bytes(const ModelConfig& config);
  void copy_snapshot_out(int snapshot, std::byte* out) const;
  void copy_snapshot_in(int snapshot, const std::byte* in);
  int state_records() const { return num_records_; }       // rows recorded per slot
  float* record_state(int slot, int row, int kda_layer) {  // [H, K, V], as state()
    return &record_state_[record_index(slot, row, kda_layer) * size_t(state_floats_)];
  }
  float* record_conv(int slot, int row, int kda_layer) {  // as conv()
    return &record_conv_[record_index(slot, row, kda_layer) * size_t(conv_floats_)];
  }
  void rewind(int slot, int row);  // record of `row` -> slot, every layer
  size_t bytes() const;

 private:
  // Whole-slot copy (every layer's state and conv history) from row `from` to row `to`.
  void copy(const std::vector<float>& from_state, const std::vector<float>& from_conv, int from,
            int from_count, std::vector<float>& to_state, std::vector<float>& to_conv, int to,
            int to_count) const;
  size_t record_index(int slot, int row, int kda_layer) const {
    return (size_t(slot) * size_t(num_records_) + size_t(row)) * size_t(num_layers_) +
           size_t(kda_layer);
  }
  int num_slots_, num_snapshots_, num_records_, num_layers_;
  int64_t state_floats_, conv_floats_;
  std::vector<float> state_, conv_;                    // [slots][layers][...]
  std::vector<float> snapshot_state_, snapshot_conv_;  // [snapshots][layers][...]
  std::vector<float> record_state_, record_conv_;      // [slots][records][layers][...]
};

}  // namespace sparkglm
