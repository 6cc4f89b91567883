#include "engine/runtime/block_allocator.h"

#include <string>

#include "engine/core/error.h"

namespace sparkglm {

BlockAllocator::BlockAllocator(int num_blocks) : ref_counts_(size_t(num_blocks), 0) {
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
    const int32_t b = free_.back();
    free_.pop_back();
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
  if (--ref_counts_[size_t(block)] == 0) free_.push_back(block);
}

void BlockAllocator::release_all(std::vector<int32_t>& table) {
  for (int32_t b : table) release(b);
  table.clear();
}

}  // namespace sparkglm
