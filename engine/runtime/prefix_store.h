#pragma once
// The prefix cache's disk tier (--prefix-cache-dir, --prefix-cache-gb): latent blocks and KDA
// snapshots evicted from memory, kept in one file so that a conversation that comes back after
// others pushed it out of the pool is restored instead of recomputed.
//
// The file is opened with O_TMPFILE, or created and unlinked at once where the file system lacks
// it: nothing is left behind however the process ends, and a leftover of the fallback's name
// (sparkglm-prefix-cache.*.tmp, a crash between the create and the unlink) is removed at start.
// A tmpfs directory is refused (it would spend memory to save memory), and so is one whose file
// system has less free space than the tier's size.
//
// The file is two shelves of fixed-size slots: snapshots get a quarter of the size (at least one
// slot), blocks the rest. Each shelf evicts its least recently used record when it is full. A
// block record keeps its parent key and tokens in memory, so a match is checked as in memory.
// The bytes are the runner's host copies (ModelRunner::copy_block_to_host and the rest); the
// store moves them through one staging buffer of max(block, snapshot) bytes, the host memory the
// tier holds (staging_bytes, taken from the CPU KV pool's budget by the runner factory).
#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace sparkglm {

struct PrefixStoreOptions {
  std::string dir;
  uint64_t capacity_bytes = 0;
  size_t block_bytes = 0;     // ModelRunner::host_block_bytes()
  size_t snapshot_bytes = 0;  // ModelRunner::host_snapshot_bytes()
};

class PrefixStore {
 public:
  // Error(kInvalidArgument) naming the directory and the numbers: not a writable directory, a
  // tmpfs, too little free space, or a size that holds not one snapshot and one block.
  explicit PrefixStore(const PrefixStoreOptions& options);
  ~PrefixStore();
  PrefixStore(const PrefixStore&) = delete;
  PrefixStore& operator=(const PrefixStore&) = delete;

  static size_t staging_bytes(size_t block_bytes, size_t snapshot_bytes);
  std::byte* staging() { return staging_.data(); }
  // "DIR: N block slots of B bytes, M snapshot slots of S bytes, ..." for the log.
  const std::string& summary() const { return summary_; }

  struct BlockRecord {
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
  };
  const BlockRecord* block(uint64_t key) const;  // null when not stored
  bool has_snapshot(uint64_t key) const { return snapshots_.index.count(key) != 0; }
  // Writes staging() as the record of `key` (evicting the shelf's least recently used when
  // full); false on an I/O error (the record is then not stored).
  bool put_block(uint64_t key, const BlockRecord& record);
  bool put_snapshot(uint64_t key);
  // Reads the record of `key` into staging(); false on an I/O error (the record is dropped).
  bool read_block(uint64_t key);
  bool read_snapshot(uint64_t key);
  void clear();  // drops every record
  int blocks() const { return int(blocks_.index.size()); }
  int snapshots() const { return int(snapshots_.index.size()); }

 private:
  // Fixed-size slots at `offset` in the file, least recently used first in `order`.
  struct Shelf {
    uint64_t offset = 0;
    size_t slot_bytes = 0;
    std::vector<int> free_slots;
    std::list<uint64_t> order;
    struct Entry {
      int slot;
      std::list<uint64_t>::iterator at;
    };
    std::unordered_map<uint64_t, Entry> index;
  };
  bool put(Shelf& shelf, uint64_t key);
  bool read(Shelf& shelf, uint64_t key);
  void drop(Shelf& shelf, uint64_t key);

  std::string dir_, summary_;
  int fd_ = -1;
  std::vector<std::byte> staging_;
  Shelf blocks_, snapshots_;
  std::unordered_map<uint64_t, BlockRecord> block_records_;
};

}  // namespace sparkglm
