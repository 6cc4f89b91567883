#include "engine/runtime/block_allocator.h"

#include <algorithm>
#include <string>

#include "engine/core/error.h"

namespace sparkglm {

BlockAllocator::BlockAllocator(int num_blocks)
    : ref_counts_(size_t(num_blocks), 0),
      cached_(size_t(num_blocks), 0),
      prev_(size_t(num_blocks), -1),
      next_(size_t(num_blocks), -1) {
  free_.reserve(size_t(num_blocks));
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::vector<int32_t> BlockAllocator::allocate(int n) {
  if (n > num_free())
    throw Error(ErrorKind::kCapacity, "latent cache: " + std::to_string(n) + " blocks requested, " +
                                          std::to_string(num_free()) + " free of " +
                                          std::to_string(num_blocks()));
  std::vector<int32_t> out;
  out.reserve(size_t(n));
  for (int i = 0; i < n; ++i) {
    int32_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = head_;  // the least recently released cached block
      unlink(b);
      cached_[size_t(b)] = 0;
      ++evictions_;
      if (evict_hook_) evict_hook_(b);
    }
    ref_counts_[size_t(b)] = 1;
    out.push_back(b);
  }
  return out;
}

void BlockAllocator::ensure_capacity(std::vector<int32_t>& table, int64_t tokens, int block_size) {
  const int64_t need = (tokens + block_size - 1) / block_size - int64_t(table.size());
  if (need <= 0) return;
  for (int32_t b : allocate(int(need))) table.push_back(b);
}

void BlockAllocator::retain(int32_t block) {
  SPARKGLM_ASSERT(ref_counts_[size_t(block)] > 0, "retain of a free block");
  ++ref_counts_[size_t(block)];
}

void BlockAllocator::release(int32_t block) {
  SPARKGLM_ASSERT(ref_counts_[size_t(block)] > 0, "release of a free block");
  if (--ref_counts_[size_t(block)] > 0) return;
  if (!cached_[size_t(block)]) {
    free_.push_back(block);
    return;
  }
  // Most recently released last.
  prev_[size_t(block)] = tail_;
  next_[size_t(block)] = -1;
  if (tail_ >= 0) next_[size_t(tail_)] = block;
  tail_ = block;
  if (head_ < 0) head_ = block;
  ++num_idle_cached_;
}

void BlockAllocator::release_all(std::vector<int32_t>& table) {
  for (int32_t b : table) release(b);
  table.clear();
}

void BlockAllocator::mark_cached(int32_t block) {
  SPARKGLM_ASSERT(ref_counts_[size_t(block)] > 0, "mark_cached of a free block");
  cached_[size_t(block)] = 1;
}

void BlockAllocator::acquire(int32_t block) {
  SPARKGLM_ASSERT(cached_[size_t(block)], "acquire of a block that is not cached");
  if (ref_counts_[size_t(block)]++ == 0) unlink(block);
}

void BlockAllocator::unlink(int32_t block) {
  const int32_t p = prev_[size_t(block)], n = next_[size_t(block)];
  (p >= 0 ? next_[size_t(p)] : head_) = n;
  (n >= 0 ? prev_[size_t(n)] : tail_) = p;
  prev_[size_t(block)] = next_[size_t(block)] = -1;
  --num_idle_cached_;
}

void BlockAllocator::uncache_all() {
  for (int32_t b = head_; b >= 0; b = next_[size_t(b)]) free_.push_back(b);
  for (int32_t b = 0; b < num_blocks(); ++b) prev_[size_t(b)] = next_[size_t(b)] = -1;
  head_ = tail_ = -1;
  num_idle_cached_ = 0;
  std::fill(cached_.begin(), cached_.end(), uint8_t(0));
}

}  // namespace sparkglm
