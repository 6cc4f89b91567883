// PrefixCache's disk tier: spills of evicted blocks and snapshots, and restores of a hit's
// stored records (the design is in prefix_cache.h; the file is PrefixStore).
#include <chrono>

#include "engine/core/error.h"
#include "engine/runtime/prefix_cache.h"

namespace sparkglm {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

// spill_seconds is the engine thread's time: waiting for a free staging buffer and the runner's
// host copy. The file write runs on the store's writer thread; one that fails is a disk error when
// reap() applies it.
void PrefixCache::spill_block(int32_t block, uint64_t key) {
  const auto start = Clock::now();
  runner_.copy_block_to_host(block, store_->spill_buffer());
  store_->put_block(key, {parent_of_[size_t(block)], tokens_of_[size_t(block)]});
  ++counters_.spilled_blocks;
  counters_.spill_bytes += runner_.host_block_bytes();
  counters_.spill_seconds += seconds_since(start);
  counters_.disk_errors += uint64_t(store_->reap());
}

void PrefixCache::spill_snapshot(int snapshot, uint64_t key) {
  const auto start = Clock::now();
  runner_.copy_snapshot_to_host(snapshot, store_->spill_buffer());
  store_->put_snapshot(key);
  ++counters_.spilled_snapshots;
  counters_.spill_bytes += runner_.host_snapshot_bytes();
  counters_.spill_seconds += seconds_since(start);
  counters_.disk_errors += uint64_t(store_->reap());
}

bool PrefixCache::restore(Sequence& s, Hit& hit) {
  const int bs = options_.block_size;
  std::vector<size_t> stored;
  // Every allocation (and the snapshot slot) first: making room may spill through a staging
  // buffer, which a read below may have returned.
  for (size_t i = 0; i < s.blocks.size(); ++i)
    if (s.blocks[i] < 0) {
      s.blocks[i] = blocks_.allocate(1)[0];
      stored.push_back(i);
    }
  const uint64_t snapshot_key = hit.tokens > 0 ? s.block_keys[size_t(hit.tokens / bs - 1)] : 0;
  if (hit.snapshot_on_disk) {
    hit.snapshot = reserve_snapshot(snapshot_key);
    SPARKGLM_ASSERT(hit.snapshot >= 0, "prefix cache: find() promised a free snapshot slot");
  }
  if (stored.empty() && !hit.snapshot_on_disk) return true;
  const auto start = Clock::now();
  bool ok = true;
  for (size_t i : stored) {
    const uint64_t key = s.block_keys[i];
    // Gone when the spills that made room above pushed it out of the store.
    const PrefixStore::BlockRecord* stored_record = store_->block(key);
    if (!stored_record) {
      ok = false;
      break;
    }
    const PrefixStore::BlockRecord record = *stored_record;  // a failed read drops it
    const std::byte* bytes = store_->read_block(key);
    if (!bytes) {
      ok = false;
      break;
    }
    const int32_t b = s.blocks[i];
    runner_.copy_block_from_host(b, bytes);
    by_key_[key] = b;
    key_of_[size_t(b)] = key;
    parent_of_[size_t(b)] = record.parent;
    tokens_of_[size_t(b)] = record.tokens;
    blocks_.mark_cached(b);
    ++counters_.published_blocks;
    ++counters_.restored_blocks;
    counters_.restore_bytes += runner_.host_block_bytes();
  }
  if (ok && hit.snapshot_on_disk) {
    const std::byte* bytes = store_->read_snapshot(snapshot_key);
    ok = bytes != nullptr;
    if (ok) {
      runner_.copy_snapshot_from_host(hit.snapshot, bytes);
      ++counters_.restored_snapshots;
      counters_.restore_bytes += runner_.host_snapshot_bytes();
    }
  }
  if (!ok && hit.snapshot_on_disk) {
    snapshots_[size_t(hit.snapshot)].valid = false;
    snapshot_by_key_.erase(snapshot_key);
  }
  counters_.restore_seconds += seconds_since(start);
  counters_.disk_errors += uint64_t(store_->reap());
  return ok;
}

}  // namespace sparkglm
