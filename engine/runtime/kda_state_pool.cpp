#include "engine/runtime/kda_state_pool.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"

namespace sparkglm {

KdaStatePool::KdaStatePool(const ModelConfig& config, int num_slots, int num_snapshots,
                           int state_records)
    : num_slots_(num_slots),
      num_snapshots_(num_snapshots),
      num_records_(state_records),
      num_layers_(config.num_kda_layers()) {
  if (num_slots <= 0)
    throw Error(ErrorKind::kInvalidArgument, "KDA state pool: expected at least one slot");
  const int64_t hk = int64_t(config.kda.num_heads) * config.kda.head_dim;
  state_floats_ = hk * config.kda.head_dim;
  conv_floats_ = 3 * int64_t(config.kda.short_conv_kernel_size - 1) * hk;
  state_.assign(size_t(num_slots) * size_t(num_layers_) * size_t(state_floats_), 0.0f);
  conv_.assign(size_t(num_slots) * size_t(num_layers_) * size_t(conv_floats_), 0.0f);
  if (num_snapshots < 0)
    throw Error(ErrorKind::kInvalidArgument, "KDA state pool: negative snapshot count");
  snapshot_state_.assign(size_t(num_snapshots) * size_t(num_layers_) * size_t(state_floats_), 0.0f);
  snapshot_conv_.assign(size_t(num_snapshots) * size_t(num_layers_) * size_t(conv_floats_), 0.0f);
  if (state_records < 0)
    throw Error(ErrorKind::kInvalidArgument, "KDA state pool: negative state record count");
  const size_t records = size_t(num_slots) * size_t(state_records) * size_t(num_layers_);
  record_state_.assign(records * size_t(state_floats_), 0.0f);
  record_conv_.assign(records * size_t(conv_floats_), 0.0f);
}

void KdaStatePool::rewind(int slot, int row) {
  SPARKGLM_ASSERT(slot >= 0 && slot < num_slots_ && row >= 0 && row < num_records_,
                  "KDA state record out of range");
  for (int layer = 0; layer < num_layers_; ++layer) {
    std::copy_n(record_state(slot, row, layer), state_floats_, state(slot, layer));
    std::copy_n(record_conv(slot, row, layer), conv_floats_, conv(slot, layer));
  }
}

void KdaStatePool::reset(int slot) {
  SPARKGLM_ASSERT(slot >= 0 && slot < num_slots_, "KDA slot out of range");
  const size_t s = size_t(num_layers_) * size_t(state_floats_);
  const size_t c = size_t(num_layers_) * size_t(conv_floats_);
  std::fill_n(state_.begin() + ptrdiff_t(size_t(slot) * s), s, 0.0f);
  std::fill_n(conv_.begin() + ptrdiff_t(size_t(slot) * c), c, 0.0f);
}

void KdaStatePool::save(int slot, int snapshot) {
  copy(state_, conv_, slot, num_slots_, snapshot_state_, snapshot_conv_, snapshot, num_snapshots_);
}

void KdaStatePool::restore(int snapshot, int slot) {
  copy(snapshot_state_, snapshot_conv_, snapshot, num_snapshots_, state_, conv_, slot, num_slots_);
}

size_t KdaStatePool::snapshot_bytes(const ModelConfig& config) {
  const int64_t hk = int64_t(config.kda.num_heads) * config.kda.head_dim;
  const int64_t per_layer =
      hk * config.kda.head_dim + 3 * (config.kda.short_conv_kernel_size - 1) * hk;
  return size_t(config.num_kda_layers()) * size_t(per_layer) * sizeof(float);
}

void KdaStatePool::copy_snapshot_out(int snapshot, std::byte* out) const {
  SPARKGLM_ASSERT(snapshot >= 0 && snapshot < num_snapshots_, "KDA snapshot out of range");
  const size_t s = size_t(num_layers_) * size_t(state_floats_);
  const size_t c = size_t(num_layers_) * size_t(conv_floats_);
  std::memcpy(out, &snapshot_state_[size_t(snapshot) * s], s * sizeof(float));
  std::memcpy(out + s * sizeof(float), &snapshot_conv_[size_t(snapshot) * c], c * sizeof(float));
}

void KdaStatePool::copy_snapshot_in(int snapshot, const std::byte* in) {
  SPARKGLM_ASSERT(snapshot >= 0 && snapshot < num_snapshots_, "KDA snapshot out of range");
  const size_t s = size_t(num_layers_) * size_t(state_floats_);
  const size_t c = size_t(num_layers_) * size_t(conv_floats_);
  std::memcpy(&snapshot_state_[size_t(snapshot) * s], in, s * sizeof(float));
  std::memcpy(&snapshot_conv_[size_t(snapshot) * c], in + s * sizeof(float), c * sizeof(float));
}

void KdaStatePool::copy(const std::vector<float>& from_state, const std::vector<float>& from_conv,
                        int from, int from_count, std::vector<float>& to_state,
                        std::vector<float>& to_conv, int to, int to_count) const {
  SPARKGLM_ASSERT(from >= 0 && from < from_count, "KDA slot or snapshot out of range");
  SPARKGLM_ASSERT(to >= 0 && to < to_count, "KDA slot or snapshot out of range");
  const size_t s = size_t(num_layers_) * size_t(state_floats_);
  const size_t c = size_t(num_layers_) * size_t(conv_floats_);
  std::copy_n(from_state.begin() + ptrdiff_t(size_t(from) * s), s,
              to_state.begin() + ptrdiff_t(size_t(to) * s));
  std::copy_n(from_conv.begin() + ptrdiff_t(size_t(from) * c), c,
              to_conv.begin() + ptrdiff_t(size_t(to) * c));
}

size_t KdaStatePool::bytes() const {
  return (state_.size() + conv_.size() + snapshot_state_.size() + snapshot_conv_.size() +
          record_state_.size() + record_conv_.size()) *
         sizeof(float);
}

}  // namespace sparkglm
