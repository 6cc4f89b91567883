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
// The bytes are the runner's host copies (ModelRunner::copy_block_to_host and the rest). A spill's
// file write runs on a writer thread (PrefixStoreWriter): the engine thread copies a record into
// one of kStagingBuffers staging buffers of max(block, snapshot) bytes and queues it, waiting only
// when every buffer is still being written. Those buffers are the host memory the tier holds
// (staging_bytes, taken from the CPU KV pool's budget by the runner factory).
//
// A record whose write is still queued reads from its buffer; one put again while its first write
// is queued is written again behind it (one writer, in order), so it reads as the newest bytes. A
// write that fails drops its record (unless it was put again since) and counts in reap(): a later
// hit on it is a miss.
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/runtime/prefix_store_writer.h"

namespace sparkglm {

struct PrefixStoreOptions {
  std::string dir;
  uint64_t capacity_bytes = 0;
  size_t block_bytes = 0;                   // ModelRunner::host_block_bytes()
  size_t snapshot_bytes = 0;                // ModelRunner::host_snapshot_bytes()
  PrefixStoreWriter::Gate write_gate = {};  // tests: holds or fails writes (PrefixStoreWriter)
};

class PrefixStore {
 public:
  // Error(kInvalidArgument) naming the directory and the numbers: not a writable directory, a
  // tmpfs, too little free space, or a size that holds not one snapshot and one block.
  explicit PrefixStore(const PrefixStoreOptions& options);
  ~PrefixStore();
  PrefixStore(const PrefixStore&) = delete;
  PrefixStore& operator=(const PrefixStore&) = delete;

  // Two: the engine thread copies the next record into one while the other is being written. A
  // third helps only when spills come faster than the disk takes them, and then the disk is the
  // limit and the engine thread waits anyway, holding one more record of host memory (a
  // GLM-5.3-Flash snapshot is about 146 MiB).
  static constexpr int kStagingBuffers = 2;
  static size_t staging_bytes(size_t block_bytes, size_t snapshot_bytes);  // all the buffers
  // "DIR: N block slots of B bytes, M snapshot slots of S bytes, ..." for the log.
  const std::string& summary() const { return summary_; }

  struct BlockRecord {
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
  };
  const BlockRecord* block(uint64_t key) const;  // null when not stored
  bool has_snapshot(uint64_t key) const { return snapshots_.index.count(key) != 0; }
  // The staging buffer for the next put_block or put_snapshot to take (a free one: this waits while
  // every buffer is being written).
  std::byte* spill_buffer();
  // Stores spill_buffer() as the record of `key` (evicting the shelf's least recently used when
  // full) and queues its write.
  void put_block(uint64_t key, const BlockRecord& record);
  void put_snapshot(uint64_t key);
  // The record of `key`: the buffer of its queued write, or read from the file into a staging
  // buffer; valid until the next spill_buffer() or read. Null when it is not stored (a failed
  // write dropped it) or on a read error (which drops it).
  const std::byte* read_block(uint64_t key);
  const std::byte* read_snapshot(uint64_t key);
  // Applies the writes that failed (each drops its record) and returns how many failed since the
  // last call: disk errors.
  int reap();
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
      uint64_t ticket;  // of its latest write
    };
    std::unordered_map<uint64_t, Entry> index;
  };
  void put(Shelf& shelf, uint64_t key);
  const std::byte* read(Shelf& shelf, uint64_t key);
  void drop(Shelf& shelf, uint64_t key);
  int take_buffer();      // the engine thread's buffer: a free one, or the one it holds
  void apply_failures();  // drops the records of failed writes

  std::string dir_, summary_;
  int fd_ = -1;
  Shelf blocks_, snapshots_;
  std::unordered_map<uint64_t, BlockRecord> block_records_;
  // Per staging buffer: the write whose bytes it holds (ticket 0: none), until it is taken again.
  struct Queued {
    uint64_t ticket = 0;
    Shelf* shelf = nullptr;
    uint64_t key = 0;
  };
  std::vector<Queued> queued_;
  int engine_buffer_ = -1;  // taken by the engine thread and not queued, or -1
  uint64_t tickets_ = 0;
  int failed_writes_ = 0;                      // since the last reap()
  std::unique_ptr<PrefixStoreWriter> writer_;  // last: destroyed (joined) first
};

}  // namespace sparkglm
