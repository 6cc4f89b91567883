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
// that step's rows. Snapshots are evicted least recently used (used = saved or hit); one pinned
// by an admitted sequence that has not restored it yet is never evicted.
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
// Eviction: blocks of finished sequences stay published in the allocator's least recently
// released list; allocate() evicts from it on demand, and the evict hook drops the key (and a
// snapshot keyed at that block). A failed step drops every key and snapshot (clear()).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/model/forward_batch.h"
#include "engine/runtime/block_allocator.h"
#include "engine/runtime/sequence.h"

namespace sparkglm {

struct PrefixCacheOptions {
  int block_size = 16;
  int chunk = 64;  // the KDA chunk: SchedulerLimits::prefill_align
  int num_snapshots = 16;
  int snapshot_every_chunks = 0;  // also save every this many chunks (0: off)
  uint64_t identity = 0;          // PrefixCache::identity(model, precision)
};

struct PrefixCacheCounters {
  uint64_t lookups = 0, hits = 0, hit_tokens = 0;
  uint64_t snapshots_saved = 0, snapshot_evictions = 0;
  uint64_t published_blocks = 0;
};

class PrefixCache {
 public:
  // Error(kInvalidArgument) without snapshots or with a block size the grid cannot use.
  PrefixCache(BlockAllocator& blocks, const PrefixCacheOptions& options);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Seeds every key: requests of different models or precisions never match.
  static uint64_t identity(const std::string& model, const std::string& precision);
  int grid() const { return grid_; }

  struct Hit {
    int tokens = 0;               // cached prefix length (a multiple of grid(); 0: a miss)
    int snapshot = -1;            // its KDA snapshot
    std::vector<int32_t> blocks;  // its blocks, tokens / block_size of them
    int matched_blocks = 0;       // cached blocks matched, with or without a snapshot
  };
  // The longest hit of a waiting sequence (fills s.block_keys); takes nothing.
  Hit find(Sequence& s);
  // Blocks of the hit that are idle (counted in the allocator's num_free until taken).
  int idle_blocks(const Hit& hit) const;
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
    int pins = 0;
    uint64_t used = 0;  // clock_ when saved or last hit
  };
  uint64_t seed(const std::string& salt) const;
  void forget_block(int32_t block);    // the allocator's evict hook
  int reserve_snapshot(uint64_t key);  // a slot for a new snapshot, or -1 (all pinned)
  void publish(const Sequence& s, int block_index);

  BlockAllocator& blocks_;
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
