#pragma once
// Prefix caching for a hybrid model: shared latent blocks and KDA state snapshots.
//
// Keys. A full block of a prefill (block_size tokens) is keyed by a hash chain: key[-1] seeds
// from the model and precision identity (checkpoint fingerprint, kv-cache dtype) and the
// request's cache_salt; key[i] = hash(key[i-1], tokens of block i). Equal keys mean equal
// tokens from position 0 under the same model, precision and salt; a match is also checked
// against the block's stored tokens and parent key, so a hash collision cannot hand out a wrong
// block. A block holds everything of its positions that an MLA layer reads later (latent c_kv,
// indexer key and pooling gate, per MLA layer: engine/runtime/latent_cache.h), so sharing it
// covers the DSA indexer too (pooled keys are recomputed from keys and gates on every read).
//
// Snapshots. KDA is recurrent: a sequence can resume at position p only from its state after p
// tokens. The cache saves whole-slot copies (every KDA layer's recurrent state and conv history)
// into a bounded set of snapshots beside the state slots (KdaStatePool, Caches), at positions on
// the grid g = lcm(chunk, block_size), by a policy: the end of every prompt (its last grid point
// before the final token, so a replay and a continuation both find it), every N chunks
// (--prefix-snapshot-every, off by default), and branch points (a prompt matching cached blocks
// beyond its hit: the next conversation diverging there finds a snapshot; Marconi, arXiv
// 2411.19379). A save ends the prefill slice at its position; the runner copies the slot after
// that step's rows. Eviction takes first the snapshots that a later one supersedes (saved further
// along the same token path: a turn's prompt end once its answer or the next turn has one), then
// the rest, each least recently used first (used = saved or hit): so an idle conversation keeps
// its last snapshot while another runs many turns. One pinned by an admitted sequence that has
// not restored it yet is never evicted.
//
// The hit of a waiting sequence is the longest prefix, at most prefill_end - 1 tokens (one token
// is always computed, for its logits), whose blocks are all cached and which has a snapshot at
// its end. The sequence takes the blocks by reference, starts with `computed` = the hit and its
// first slice restores the snapshot into its slot (SequenceSlice::restore_snapshot).
//
// Why the bits are the same as a cold prefill: the scheduler splits prefills only on the chunk
// grid (scheduler.h), and a prefill slice starting at a grid point computes exactly what the
// same rows compute inside a longer slice (batch invariance): the chunked KDA form starts a
// chunk from the state at its boundary, and attention reads earlier positions from the cache.
// A hit starts on the grid, from the state and cache entries a cold prefill also had there:
// bitwise the same. What is published must be what any cold prefill computes there, so only
// blocks of whole chunks of a prefill are: the rows of a prompt's final partial chunk come out of
// a shorter chunk than inside a longer prompt, in other bits (a test caught it), and a decode row
// computes its KV by the token-by-token recurrence, in other bits again; those blocks stay
// private. A preempted sequence's recompute is a prefill and does publish.
//
// Write protection: a published block is never written again. A sequence writes only positions
// at or after `computed`, and publishes only blocks wholly before it; the scheduler asserts that
// every block a slice writes is unpublished and referenced by that sequence alone.
//
// Answers. A finished request's generated tokens were computed by decode rows, which are not
// published (above). So that the next turn of a conversation (which resends the answer) finds
// them, the scheduler prefills the finished conversation once more, up to its last grid point,
// from the prompt's snapshot: an answer sequence (Sequence::answer) that samples nothing,
// publishes the whole chunks it computes and saves a snapshot at its end, computing exactly what
// the next turn's cold prefill computes there. It runs only while no request runs or waits.
//
// Eviction: blocks of finished sequences stay published in the allocator's least recently
// released list; allocate() evicts from it on demand, and the evict hook drops the key (and a
// snapshot keyed at that block). A failed step drops every key and snapshot (clear()).
//
// Disk tier (PrefixCacheOptions::disk_bytes > 0; engine/runtime/prefix_store.h): an evicted
// block, and an evicted snapshot, is first copied to the host through the runner and handed to the
// store, whose writer thread writes it to the file (a spill); find() matches stored blocks and
// snapshots as it matches resident ones, and take() reads them back into fresh blocks and a
// snapshot slot (a restore). The runner's copies run in step order
// (ModelRunner::copy_block_to_host), so a spill reads what every earlier step wrote and a restore
// lands before the step that reads it. A restored record holds the bytes a cold prefill wrote, so a
// restore computes what a resident hit computes: bit for bit a cold prefill. A read that fails
// makes the hit a miss (the sequence prefills from 0).
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/model/forward_batch.h"
#include "engine/model/model_runner.h"
#include "engine/runtime/block_allocator.h"
#include "engine/runtime/prefix_store.h"
#include "engine/runtime/sequence.h"

namespace sparkglm {

struct PrefixCacheOptions {
  int block_size = 16;
  int chunk = 64;  // the KDA chunk: SchedulerLimits::prefill_align
  int num_snapshots = 16;
  int snapshot_every_chunks = 0;  // also save every this many chunks (0: off)
  uint64_t identity = 0;          // PrefixCache::identity(model, precision)
  std::string disk_dir = {};      // the disk tier (--prefix-cache-dir); used when disk_bytes > 0
  uint64_t disk_bytes = 0;        // --prefix-cache-gb in bytes (0: no disk tier)
};

struct PrefixCacheCounters {
  uint64_t lookups = 0, hits = 0, hit_tokens = 0;
  uint64_t snapshots_saved = 0, snapshot_evictions = 0;
  uint64_t published_blocks = 0;
  uint64_t answers = 0, answer_tokens = 0;  // answer sequences taken, the tokens they prefill
  // The disk tier: records spilled (queued for the store's writer thread) and read back, and their
  // bytes; the engine thread's seconds: a spill's wait for a free staging buffer and the runner's
  // host copy (not the file write, which runs on the writer thread), a restore's reads and host
  // copies. Disk errors: writes and reads that failed (a failed write drops its record, so a
  // later hit on it is a miss) and restores that lost a record (pushed out by the spills that
  // made room for its own restore).
  uint64_t spilled_blocks = 0, spilled_snapshots = 0, spill_bytes = 0;
  uint64_t restored_blocks = 0, restored_snapshots = 0, restore_bytes = 0;
  double spill_seconds = 0, restore_seconds = 0;
  uint64_t disk_errors = 0;
};

class PrefixCache {
 public:
  // Error(kInvalidArgument) without snapshots or with a block size the grid cannot use; with a
  // disk tier, what PrefixStore refuses, or a runner without host copies.
  PrefixCache(BlockAllocator& blocks, ModelRunner& runner, const PrefixCacheOptions& options);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Seeds every key: requests of different models or precisions never match.
  static uint64_t identity(const std::string& model, const std::string& precision);
  int grid() const { return grid_; }

  struct Hit {
    int tokens = 0;     // cached prefix length (a multiple of grid(); 0: a miss)
    int snapshot = -1;  // its resident KDA snapshot, or -1
    bool snapshot_on_disk = false;
    std::vector<int32_t> blocks;  // its blocks, tokens / block_size of them (-1: on disk)
    int matched_blocks = 0;       // cached blocks matched, with or without a snapshot
  };
  // The longest hit of a waiting sequence (fills s.block_keys); takes nothing. An answer
  // sequence may hit its whole prefill (it needs no logits).
  Hit find(Sequence& s);
  // Blocks the hit takes out of the allocator's num_free: idle cached ones and restored ones.
  int free_blocks_taken(const Hit& hit) const;
  // Where the answer sequence of finished `s` would end (its last grid point), or 0 when that
  // adds nothing to the snapshot at the end of its prompt.
  int answer_end(const Sequence& s) const;
  bool disk_tier() const { return store_ != nullptr; }
  std::string disk_summary() const { return store_ ? store_->summary() : std::string(); }
  // Takes the hit: s.blocks = its blocks (referenced), s.computed = hit.tokens, the snapshot pinned
  // until the first slice restores it; plans the sequence's snapshot saves.
  void take(Sequence& s, const Hit& hit);
  // The end of a prefill slice of s from `start`, capped at its next save point.
  int cap_prefill(const Sequence& s, int start, int end) const;
  // The slice [start, end) of s is in the step about to be submitted: sets its restore and save
  // snapshots and publishes the full blocks it completes.
  void mark_slice(Sequence& s, SequenceSlice& slice, int start, int end);
  // The sequence leaves its slot (finished, preempted): unpins and forgets its plan.
  void drop(Sequence& s);
  // A step failed: every key and snapshot goes (its contents may not have been written).
  void clear();

  const PrefixCacheCounters& counters() const { return counters_; }
  int snapshots_valid() const;
  int snapshots_pinned() const;  // held by admitted sequences that have not restored them yet

 private:
  struct Snapshot {
    uint64_t key = 0;
    bool valid = false;
    // A later snapshot was saved further along the same token path (a conversation's next turn or
    // its answer): a request that extends the path resumes there, so this one is evicted first.
    bool superseded = false;
    int pins = 0;
    uint64_t used = 0;  // clock_ when saved or last hit
  };
  uint64_t seed(const std::string& salt) const;
  void forget_block(int32_t block);    // the allocator's evict hook
  int reserve_snapshot(uint64_t key);  // a slot for a new snapshot, or -1 (all pinned)
  // Marks the snapshots at s's block keys before block_index superseded.
  void supersede_ancestors(const Sequence& s, int block_index);
  void publish(const Sequence& s, int block_index);
  // The disk tier (prefix_cache_disk.cpp).
  void spill_block(int32_t block, uint64_t key);
  void spill_snapshot(int snapshot, uint64_t key);
  // Reads the hit's stored blocks and snapshot into s.blocks (fresh blocks, published again) and
  // a snapshot slot; false when a read failed (nothing published, the snapshot slot freed).
  bool restore(Sequence& s, Hit& hit);

  BlockAllocator& blocks_;
  ModelRunner& runner_;
  std::unique_ptr<PrefixStore> store_;  // the disk tier, or null
  PrefixCacheOptions options_;
  int grid_;
  std::unordered_map<uint64_t, int32_t> by_key_;  // published blocks
  std::vector<uint64_t> key_of_, parent_of_;      // per block
  std::vector<std::vector<int32_t>> tokens_of_;   // per block: its tokens, checked on a match
  std::vector<Snapshot> snapshots_;
  std::unordered_map<uint64_t, int> snapshot_by_key_;
  uint64_t clock_ = 0;
  PrefixCacheCounters counters_;
};

}  // namespace sparkglm
