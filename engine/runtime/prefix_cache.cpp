#include "engine/runtime/prefix_cache.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "engine/core/error.h"

namespace sparkglm {

namespace {

uint64_t mix(uint64_t x) {  // the splitmix64 finaliser: every input bit reaches every output bit
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_text(uint64_t h, const std::string& text) {
  h = mix(h ^ (0x9e3779b97f4a7c15ull + text.size()));
  for (unsigned char c : text) h = mix(h ^ c);
  return h;
}

uint64_t block_key(uint64_t parent, const int32_t* tokens, int n) {
  uint64_t h = mix(parent + 0x9e3779b97f4a7c15ull);
  for (int i = 0; i < n; ++i) h = mix(h ^ (uint64_t(uint32_t(tokens[i])) + 0x632be59bd9b4e019ull));
  return h;
}

}  // namespace

PrefixCache::PrefixCache(BlockAllocator& blocks, ModelRunner& runner,
                         const PrefixCacheOptions& options)
    : blocks_(blocks),
      runner_(runner),
      options_(options),
      key_of_(size_t(blocks.num_blocks()), 0),
      parent_of_(size_t(blocks.num_blocks()), 0),
      tokens_of_(size_t(blocks.num_blocks())),
      snapshots_(size_t(std::max(options.num_snapshots, 0))) {
  if (options.num_snapshots < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "prefix cache: the runner has no KDA state snapshots (a hit needs one)");
  SPARKGLM_ASSERT(options.block_size >= 1 && options.chunk >= 1, "prefix cache: bad geometry");
  if (options.snapshot_every_chunks < 0)
    throw Error(ErrorKind::kInvalidArgument,
                "--prefix-snapshot-every: expected 0 or more chunks, got " +
                    std::to_string(options.snapshot_every_chunks));
  grid_ = std::lcm(options.block_size, options.chunk);
  if (options.disk_bytes > 0) {
    if (runner.host_block_bytes() == 0)
      throw Error(ErrorKind::kUnsupported,
                  "--prefix-cache-dir: this backend cannot copy latent blocks and KDA snapshots "
                  "to the host, which the disk tier needs");
    store_ = std::make_unique<PrefixStore>(PrefixStoreOptions{options.disk_dir, options.disk_bytes,
                                                              runner.host_block_bytes(),
                                                              runner.host_snapshot_bytes()});
  }
  blocks_.set_evict_hook([this](int32_t b) { forget_block(b); });
}

PrefixCache::~PrefixCache() {
  blocks_.set_evict_hook(nullptr);
}

uint64_t PrefixCache::identity(const std::string& model, const std::string& precision) {
  return hash_text(hash_text(0x5eedcafe, model), precision);
}

uint64_t PrefixCache::seed(const std::string& salt) const {
  return hash_text(mix(options_.identity), salt);
}

PrefixCache::Hit PrefixCache::find(Sequence& s) {
  const int bs = options_.block_size, end = s.prefill_end();
  const int full = end / bs, limit = s.answer ? end : end - 1;
  s.block_keys.resize(size_t(full));
  uint64_t parent = seed(s.request.cache_salt);
  for (int i = 0; i < full; ++i) {
    s.block_keys[size_t(i)] = block_key(parent, &s.tokens[size_t(i * bs)], bs);
    parent = s.block_keys[size_t(i)];
  }
  ++counters_.lookups;
  if (store_) counters_.disk_errors += uint64_t(store_->reap());  // failed writes: not matched
  Hit hit;
  std::vector<int32_t> matched;
  // A stored snapshot needs a slot to come back into.
  const bool slot_free = std::any_of(snapshots_.begin(), snapshots_.end(),
                                     [](const Snapshot& sn) { return sn.pins == 0; });
  parent = seed(s.request.cache_salt);
  for (int i = 0; i < full; ++i) {
    const uint64_t key = s.block_keys[size_t(i)];
    const auto* first = &s.tokens[size_t(i * bs)];
    int32_t b = -1;  // on disk
    if (const auto it = by_key_.find(key); it != by_key_.end()) {
      b = it->second;
      if (parent_of_[size_t(b)] != parent ||
          !std::equal(first, first + bs, tokens_of_[size_t(b)].begin()))
        break;  // a hash collision: treat as a miss
    } else if (const PrefixStore::BlockRecord* r = store_ ? store_->block(key) : nullptr) {
      if (r->parent != parent || !std::equal(first, first + bs, r->tokens.begin())) break;
    } else {
      break;
    }
    matched.push_back(b);
    parent = key;
    const int p = (i + 1) * bs;
    if (p > limit || p % grid_ != 0) continue;
    if (const auto snap = snapshot_by_key_.find(key); snap != snapshot_by_key_.end()) {
      hit = {p, snap->second, false, {}, 0};
    } else if (store_ && slot_free && store_->has_snapshot(key)) {
      hit = {p, -1, true, {}, 0};
    }
  }
  hit.matched_blocks = int(matched.size());
  hit.blocks.assign(matched.begin(), matched.begin() + hit.tokens / bs);
  return hit;
}

int PrefixCache::free_blocks_taken(const Hit& hit) const {
  int n = 0;
  for (int32_t b : hit.blocks) n += b < 0 || blocks_.ref_count(b) == 0;
  return n;
}

int PrefixCache::answer_end(const Sequence& s) const {
  const int end = int(s.tokens.size()) / grid_ * grid_;
  return end > (s.prompt_len - 1) / grid_ * grid_ ? end : 0;
}

void PrefixCache::take(Sequence& s, const Hit& found) {
  const int bs = options_.block_size;
  Hit hit = found;
  for (int32_t b : hit.blocks)
    if (b >= 0) blocks_.acquire(b);  // first: a restore's allocations may evict idle blocks
  s.blocks = hit.blocks;
  if (store_ && !restore(s, hit)) {
    // A lost record: the sequence prefills from 0 in blocks of its own, as many as the hit's.
    ++counters_.disk_errors;
    blocks_.release_all(s.blocks);
    s.blocks = blocks_.allocate(int(hit.blocks.size()));
    hit = Hit{};
  }
  s.computed = hit.tokens;
  s.published_blocks = hit.tokens / bs;
  if (s.generated() == 0) s.cached_tokens = hit.tokens;
  if (hit.snapshot >= 0) {
    Snapshot& sn = snapshots_[size_t(hit.snapshot)];
    ++sn.pins;
    sn.used = ++clock_;
    s.restore_snapshot = hit.snapshot;
    if (!s.answer) {
      ++counters_.hits;
      counters_.hit_tokens += uint64_t(hit.tokens);
    }
  }
  // Snapshot saves, on the grid, after the hit and no later than the prefill's end.
  const int end = s.prefill_end();
  if (s.answer) {
    ++counters_.answers;
    counters_.answer_tokens += uint64_t(end - hit.tokens);
  }
  std::vector<int>& points = s.save_points;
  points.clear();
  // The end of the prompt, before its final token (an answer sequence: its end, on the grid).
  const int last = s.answer ? end : (end - 1) / grid_ * grid_;
  if (last > hit.tokens) points.push_back(last);
  if (options_.snapshot_every_chunks > 0) {
    const int every = (options_.snapshot_every_chunks * options_.chunk + grid_ - 1) / grid_ * grid_;
    for (int p = every; p <= last; p += every)
      if (p > hit.tokens) points.push_back(p);
  }
  const int branch = hit.matched_blocks * bs / grid_ * grid_;  // where it leaves cached blocks
  if (branch > hit.tokens && branch <= end) points.push_back(branch);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
}

int PrefixCache::cap_prefill(const Sequence& s, int start, int end) const {
  for (int p : s.save_points)
    if (p > start) return std::min(end, p);
  return end;
}

void PrefixCache::mark_slice(Sequence& s, SequenceSlice& slice, int start, int end) {
  const int bs = options_.block_size;
  if (s.restore_snapshot >= 0) {
    SPARKGLM_ASSERT(start == s.computed && start > 0, "prefix cache: restore off its hit");
    slice.restore_snapshot = s.restore_snapshot;
    --snapshots_[size_t(s.restore_snapshot)].pins;  // later steps run after this restore
    s.restore_snapshot = -1;
  }
  auto& points = s.save_points;
  while (!points.empty() && points.front() <= start) points.erase(points.begin());
  if (!points.empty() && points.front() == end) {
    points.erase(points.begin());
    const uint64_t key = s.block_keys[size_t(end / bs - 1)];
    supersede_ancestors(s, end / bs - 1);
    const auto have = snapshot_by_key_.find(key);
    if (have != snapshot_by_key_.end()) {
      snapshots_[size_t(have->second)].used = ++clock_;
    } else if (const int slot = reserve_snapshot(key); slot >= 0) {
      slice.save_snapshot = slot;
      ++counters_.snapshots_saved;
    }
  }
  // Blocks this slice completes within whole chunks: their contents are written in this step,
  // and every step that reads them through another sequence runs after it. Rows of a prompt's
  // final, partial chunk are not published: the chunked KDA form computes a row of a short chunk
  // in other bits than the same row inside a full one (a longer prompt's cold prefill).
  const int whole = end / options_.chunk * options_.chunk;
  const int complete = std::min(whole / bs, int(s.block_keys.size()));
  for (int i = s.published_blocks; i < complete; ++i) publish(s, i);
  s.published_blocks = std::max(s.published_blocks, complete);
}

void PrefixCache::publish(const Sequence& s, int i) {
  const int bs = options_.block_size;
  const uint64_t key = s.block_keys[size_t(i)];
  if (by_key_.count(key)) return;  // another sequence published the same tokens: ours stays private
  const int32_t b = s.blocks[size_t(i)];
  SPARKGLM_ASSERT(!blocks_.cached(b), "prefix cache: publishing a published block");
  by_key_[key] = b;
  key_of_[size_t(b)] = key;
  parent_of_[size_t(b)] = i > 0 ? s.block_keys[size_t(i - 1)] : seed(s.request.cache_salt);
  tokens_of_[size_t(b)].assign(s.tokens.begin() + i * bs, s.tokens.begin() + (i + 1) * bs);
  blocks_.mark_cached(b);
  ++counters_.published_blocks;
}

void PrefixCache::drop(Sequence& s) {
  if (s.restore_snapshot >= 0) --snapshots_[size_t(s.restore_snapshot)].pins;
  s.restore_snapshot = -1;
  s.save_points.clear();
  s.block_keys.clear();
  s.published_blocks = 0;
}

void PrefixCache::forget_block(int32_t b) {
  const uint64_t key = key_of_[size_t(b)];
  if (store_ && !store_->block(key)) spill_block(b, key);
  by_key_.erase(key);
  tokens_of_[size_t(b)].clear();
  // A snapshot at this block can never be hit again: free its slot unless a sequence holds it.
  const auto snap = snapshot_by_key_.find(key);
  if (snap != snapshot_by_key_.end() && snapshots_[size_t(snap->second)].pins == 0) {
    if (store_ && !store_->has_snapshot(key)) spill_snapshot(snap->second, key);
    snapshots_[size_t(snap->second)].valid = false;
    snapshot_by_key_.erase(snap);
  }
}

void PrefixCache::supersede_ancestors(const Sequence& s, int block_index) {
  for (int i = 0; i < block_index; ++i) {
    const auto it = snapshot_by_key_.find(s.block_keys[size_t(i)]);
    if (it != snapshot_by_key_.end()) snapshots_[size_t(it->second)].superseded = true;
  }
}

int PrefixCache::reserve_snapshot(uint64_t key) {
  // The victim: a free slot, else the least recently used superseded snapshot, else the least
  // recently used one.
  const auto better = [](const Snapshot& a, const Snapshot& b) {
    return a.superseded != b.superseded ? a.superseded : a.used < b.used;
  };
  int best = -1;
  for (int i = 0; i < int(snapshots_.size()); ++i) {
    const Snapshot& sn = snapshots_[size_t(i)];
    if (sn.pins > 0) continue;
    if (!sn.valid) {
      best = i;
      break;
    }
    if (best < 0 || better(sn, snapshots_[size_t(best)])) best = i;
  }
  if (best < 0) return -1;
  Snapshot& sn = snapshots_[size_t(best)];
  if (sn.valid) {
    // Stored only while its blocks are somewhere: without them no hit can reach it.
    if (store_ && !store_->has_snapshot(sn.key) && (by_key_.count(sn.key) || store_->block(sn.key)))
      spill_snapshot(best, sn.key);
    snapshot_by_key_.erase(sn.key);
    ++counters_.snapshot_evictions;
  }
  sn.key = key;
  sn.valid = true;
  sn.superseded = false;
  sn.used = ++clock_;
  snapshot_by_key_[key] = best;
  return best;
}

void PrefixCache::clear() {
  blocks_.uncache_all();
  by_key_.clear();
  for (auto& t : tokens_of_) t.clear();
  snapshot_by_key_.clear();
  for (Snapshot& sn : snapshots_) sn.valid = false;
  if (store_) store_->clear();  // a spill may have copied what the failed step never wrote
}

int PrefixCache::snapshots_valid() const {
  return int(snapshot_by_key_.size());
}

int PrefixCache::snapshots_pinned() const {
  int n = 0;
  for (const Snapshot& sn : snapshots_) n += sn.pins;
  return n;
}

}  // namespace sparkglm
