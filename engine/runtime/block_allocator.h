#pragma once
// Hands out latent-cache blocks with reference counts (so that prefix sharing can later retain a
// block from two sequences); a block returns to the free list when its count reaches zero.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sparkglm {

class BlockAllocator {
 public:
  explicit BlockAllocator(int num_blocks);

  int num_blocks() const { return int(ref_counts_.size()); }
  int num_free() const { return int(free_.size()); }
  // n blocks with count 1, or Error(kCapacity) naming how many were asked and how many are free.
  std::vector<int32_t> allocate(int n);
  // Grows a block table so it covers `tokens` positions of `block_size`.
  void ensure_capacity(std::vector<int32_t>& table, int64_t tokens, int block_size);
  void retain(int32_t block);
  void release(int32_t block);
  void release_all(std::vector<int32_t>& table);  // releases and clears
  int ref_count(int32_t block) const { return ref_counts_[size_t(block)]; }

 private:
  std::vector<int> ref_counts_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

}  // namespace sparkglm
