#include "engine/runtime/kda_state_pool.h"

#include <algorithm>

#include "engine/core/error.h"

namespace sparkglm {

KdaStatePool::KdaStatePool(const ModelConfig& config, int num_slots, int num_snapshots)
    : num_slots_(num_slots), num_snapshots_(num_snapshots), num_layers_(config.num_kda_layers()) {
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
}

void KdaStatePool::reset(int slot) {
  SPARKGLM_ASSERT(slot >= 0 && slot < num_slots_, "KDA slot out of range");
  const size_t s = size_t(num_layers_) * size_t(state_floats_);
  const size_t c = size_t(num_layers_) * size_t(conv_floats_);
  std::fill_n(state_.begin() + ptrdiff_t(size_t(slot) * s), s, 0.0f);
  std::fill_n(conv_.begin() + ptrdiff_t(size_t(slot) * c), c, 0.0f);
}

void KdaStatePool::save(int slot, int snapshot) {
  SPARKGLM_ASSERT(slot >= 0 && slot < num_slots_, "KDA slot out of range");
  SPARKGLM_ASSERT(snapshot >= 0 && snapshot < num_snapshots_, "KDA snapshot out of range");
  const size_t s = size_t(num_layers_) * size_t(state_floats_);
  const size_t c = size_t(num_layers_) * size_t(conv_floats_);
  std::copy_n(state_.begin() + ptrdiff_t(size_t(slot) * s), s,
              snapshot_state_.begin() + ptrdiff_t(size_t(snapshot) * s));
  std::copy_n(conv_.begin() + ptrdiff_t(size_t(slot) * c), c,
              snapshot_conv_.begin() + ptrdiff_t(size_t(snapshot) * c));
}

void KdaStatePool::restore(int snapshot, int slot) {
  SPARKGLM_ASSERT(slot >= 0 && slot < num_slots_, "KDA slot out of range");
  SPARKGLM_ASSERT(snapshot >= 0 && snapshot < num_snapshots_, "KDA snapshot out of range");
  const size_t s = size_t(num_layers_) * size_t(state_floats_);
  const size_t c = size_t(num_layers_) * size_t(conv_floats_);
  std::copy_n(snapshot_state_.begin() + ptrdiff_t(size_t(snapshot) * s), s,
              state_.begin() + ptrdiff_t(size_t(slot) * s));
  std::copy_n(snapshot_conv_.begin() + ptrdiff_t(size_t(snapshot) * c), c,
              conv_.begin() + ptrdiff_t(size_t(slot) * c));
}

size_t KdaStatePool::bytes() const {
  return (state_.size() + conv_.size() + snapshot_state_.size() + snapshot_conv_.size()) *
         sizeof(float);
}

}  // namespace sparkglm
