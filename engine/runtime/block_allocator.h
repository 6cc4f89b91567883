#pragma once
// Hands out latent-cache blocks with reference counts; a block returns to the free list when its
// count reaches zero.
//
// Prefix caching (engine/runtime/prefix_cache.h) marks blocks `cached`: their contents are
// published under a key. A cached block whose count reaches zero is not freed: it waits, still
// holding its tokens, in a least-recently-released list, and counts as free. allocate() takes
// plain free blocks first and then evicts cached ones, least recently released first, telling the
// evict hook so that the key goes too. acquire() takes a cached block back from the list.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace sparkglm {

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);

  int num_blocks() const { return int(ref_counts_.size()); }
  // Blocks allocate() can hand out: plain free ones and unreferenced cached ones.
  int num_free() const { return int(free_.size()) + num_idle_cached_; }
  int num_idle_cached() const { return num_idle_cached_; }
  // n blocks with count 1, or Error(kCapacity) naming how many were asked and how many are free.
  std::vector<int32_t> allocate(int n);
  // Grows a block table so it covers `tokens` positions of `block_size`.
  void ensure_capacity(std::vector<int32_t>& table, int64_t tokens, int block_size);
  void retain(int32_t block);
  void release(int32_t block);
  void release_all(std::vector<int32_t>& table);  // releases and clears
  int ref_count(int32_t block) const { return ref_counts_[size_t(block)]; }

  // Prefix caching. mark_cached needs a referenced block; acquire takes a cached block whether
  // referenced or idle (count + 1).
  void mark_cached(int32_t block);
  bool cached(int32_t block) const { return cached_[size_t(block)] != 0; }
  void acquire(int32_t block);
  // Uncaches every block (idle cached ones become plain free blocks), without calling the hook.
  void uncache_all();
  void set_evict_hook(std::function<void(int32_t)> hook) { evict_hook_ = std::move(hook); }
  uint64_t evictions() const { return evictions_; }

 private:
  void unlink(int32_t block);  // removes an idle cached block from the list
  std::vector<int> ref_counts_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  std::vector<uint8_t> cached_;
  // Idle cached blocks, a doubly linked list through prev_/next_ (-1 ends), oldest at head_.
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1;
  int num_idle_cached_ = 0;
  std::function<void(int32_t)> evict_hook_;
  uint64_t evictions_ = 0;
};

}  // namespace sparkglm
