// dsa_select: the attended positions of each query (dsa_indexer.h), two paths with one choice.
//
// The chosen pools are the topk best under (score desc, pool asc) among the non-NaN ones. Both
// paths map scores to the same order keys, find the topk-th largest key T by a 4-pass radix
// select (one byte per pass, most significant first) and how many pools holding exactly T are
// still needed (`remaining`); every pool above T is chosen, and of those at T the
// lowest-numbered `remaining` (the tie rule; the highest-numbered under the negative control
// EngineFault::kIndexerTieFlipped). When at most topk pools are valid, every valid pool is
// chosen: that is T = 0 (NaN's key) with remaining = 0.
//
// - select_kernel, one 1024-thread block per row, for rows of at most kSelectCachedPools pools:
//   their keys stay in shared memory, and one block is fast at that length. It also writes the
//   dense rows (pools <= topk) of any length.
// - The multi-block path, for longer rows (up to kIndexMaxPools): each row is cut into chunks of
//   kWidePools pools, one 256-thread block each. A decode row at a 1M-token context is then 128
//   blocks instead of one SM walking 262,144 scores eight times. Per radix pass, blocks add their
//   chunk's byte histogram (warp-aggregated shared-memory atomics, then one global atomic per
//   bin) to the row's histogram, and the last block of the row to arrive picks the byte; integer
//   sums do not depend on arrival order, so the choice is deterministic. Then each block counts
//   its chunk's pools above T and at T, and a last kernel writes each chunk's chosen pools at
//   offsets from the earlier chunks' counts, tile by tile with block scans (coalesced reads).
//
// Both paths are launched for every call (rows decide on the device which one they take), so a
// call's launches depend only on host arguments and can be captured in a graph.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/dsa_indexer.h"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kSelectThreads = 1024;
// Rows of at most kShortPools pools with a topk of at most kShortTopk (tinyglm-micro's 4 of up to
// a few hundred) find T and `remaining` in one warp, without the radix passes' block barriers.
constexpr int kShortPools = 2048;
constexpr int kShortTopk = 8;
constexpr int kSelectCachedPools = 16384;  // rows whose keys select_kernel keeps in shared memory
constexpr int kWideThreads = 256;          // one thread per histogram bin
constexpr int kWidePools = 2048;           // pools per block of the multi-block path
constexpr int kWideChunks = kIndexMaxPools / kWidePools;  // chunks of the longest row
static_assert(kIndexMaxPools % kWidePools == 0 && kWideThreads == 256);

struct SelectParams {
  const float* scores;
  int64_t score_stride;
  const int32_t* positions;
  int32_t* out;
  int64_t out_stride;
  int32_t* counts;
  int topk;
  bool flip;  // EngineFault::kIndexerTieFlipped: of the pools at T, the highest `remaining`
};

// A score's key in an unsigned order that is the float order: larger score, larger key. NaN is 0
// (below every number: never chosen); -0 and +0 share a key, as they compare equal. A non-NaN
// score's key is at least 0x007fffff (-inf's).
__device__ __forceinline__ uint32_t order_key(float f) {
  if (isnan(f)) return 0u;
  const uint32_t u = f == 0.0f ? 0u : __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Does the multi-block path select this row (else select_kernel does)?
__device__ __forceinline__ bool wide_row(int pools, int topk) {
  return pools > topk && pools > kSelectCachedPools;
}

// Inclusive prefix sum over a block of kThreads threads in thread order; *total: the sum.
// warp_sums: kThreads / 32 ints of shared memory.
template <int kThreads>
__device__ int block_scan(int v, int* warp_sums, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int incl = v;
#pragma unroll
  for (int m = 1; m < 32; m <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, incl, m);
    if (lane >= m) incl += u;
  }
  __syncthreads();  // warp_sums may still be read by a previous call
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  int all = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < warp) incl += warp_sums[w];
    all += warp_sums[w];
  }
  *total = all;
  return incl;
}

// Exclusive prefix count, in pool order, of flag(i) over pools [0, pools): each thread a
// contiguous run of pools [*b, *e); returns the count before the run and the block total.
template <typename Flag>
__device__ int run_prefix(int pools, Flag flag, int* b, int* e, int* total, int* warp_total) {
  const int per = (pools + kSelectThreads - 1) / kSelectThreads;
  *b = min(pools, int(threadIdx.x) * per);
  *e = min(pools, *b + per);
  int local = 0;
  for (int i = *b; i < *e; ++i) local += flag(i);
  return block_scan<kSelectThreads>(local, warp_total, total) - local;
}

// One radix pass's byte of T, by threads 0..255 of the block (every thread calls it): thread j
// holds bin 255 - j, and its inclusive scan counts the keys in that bin and above, so exactly one
// thread (a non-empty bin) holds the remaining-th largest key; it adds the byte to *prefix and
// leaves in *remaining how many keys of that bin are still needed. The walk from bin 255 down
// that one thread took before gave the same byte, 256 steps long. bin_sums: 8 ints of shared
// memory. Returns after a barrier, with *prefix and *remaining written.
__device__ void pick_byte(const uint32_t* hist, int shift, uint32_t* prefix, int* remaining,
                          int* bin_sums) {
  const int j = int(threadIdx.x), lane = j & 31, warp = j >> 5;
  const int need = *remaining;  // read by all before the one writer below
  int h = 0, incl = 0;
  if (j < 256) {
    h = int(hist[255 - j]);
    incl = h;
#pragma unroll
    for (int m = 1; m < 32; m <<= 1) {
      const int u = __shfl_up_sync(0xffffffffu, incl, m);
      if (lane >= m) incl += u;
    }
    if (lane == 31) bin_sums[warp] = incl;
  }
  __syncthreads();
  if (j < 256) {
    for (int w = 0; w < warp; ++w) incl += bin_sums[w];
    const int above = incl - h;
    if (above < need && incl >= need) {
      *prefix |= uint32_t(255 - j) << shift;
      *remaining = need - above;
    }
  }
  __syncthreads();
}

// Grid: rows; 1024 threads. Dense rows, and sparse rows of at most kSelectCachedPools pools
// (their keys in shared memory); longer rows are the multi-block path's. Chosen pools are written
// in pool order by a block-wide prefix count, and the tail follows.
__global__ void __launch_bounds__(kSelectThreads)
    select_kernel(const __grid_constant__ SelectParams p) {
  extern __shared__ uint32_t keys[];  // [kSelectCachedPools]
  __shared__ int warp_total[kSelectThreads / 32];
  __shared__ uint32_t hist[256];
  __shared__ int bin_sums[8];
  __shared__ uint32_t prefix;
  __shared__ int remaining, valid;
  pdl_wait();  // the scores of the kernel ahead
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const int t = p.positions[row];
  const int pools = (t + 1) / kIndexKpool;
  int32_t* out = p.out + row * p.out_stride;
  if (pools <= p.topk) {  // dense: every token 0..t
    for (int j = threadIdx.x; j <= t; j += blockDim.x) out[j] = j;
    if (threadIdx.x == 0) p.counts[row] = t + 1;
    return;
  }
  if (wide_row(pools, p.topk)) return;
  const float* scores = p.scores + row * p.score_stride;
  if (threadIdx.x == 0) valid = 0;
  __syncthreads();
  int mine = 0;
  for (int i = threadIdx.x; i < pools; i += blockDim.x) {
    keys[i] = order_key(scores[i]);
    mine += keys[i] != 0u;
  }
  atomicAdd(&valid, mine);
  if (threadIdx.x == 0) prefix = 0u, remaining = p.topk;
  __syncthreads();
  const bool all_valid = valid <= p.topk;  // then every non-NaN pool is chosen
  const bool short_row = !all_valid && pools <= kShortPools && p.topk <= kShortTopk;
  if (short_row) {
    // T is the topk-th largest valid key counting repeats, `remaining` how many pools at T are
    // still needed: the distinct keys from the top down, each with its count, until topk is
    // reached (at most topk rounds; every round finds a key, as more than topk keys are valid).
    if (threadIdx.x < 32) {
      uint32_t below = 0xffffffffu;  // above every key (+inf's is 0xff800000)
      int above = 0;
      for (int round = 0; round < p.topk; ++round) {
        uint32_t m = 0u;
        for (int i = threadIdx.x; i < pools; i += 32) {
          const uint32_t k = keys[i];
          if (k < below && k > m) m = k;
        }
        m = __reduce_max_sync(0xffffffffu, m);
        int c = 0;
        for (int i = threadIdx.x; i < pools; i += 32) c += int(keys[i] == m);
        c = int(__reduce_add_sync(0xffffffffu, unsigned(c)));
        if (above + c >= p.topk) {
          if (threadIdx.x == 0) prefix = m, remaining = p.topk - above;
          break;
        }
        above += c;
        below = m;
      }
    }
    __syncthreads();
  }
  uint32_t mask = 0u;
  for (int shift = 24; shift >= 0 && !all_valid && !short_row; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0u;
    __syncthreads();
    for (int i = threadIdx.x; i < pools; i += blockDim.x) {
      const uint32_t k = keys[i];
      if (k != 0u && (k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255u], 1u);
    }
    __syncthreads();
    pick_byte(hist, shift, &prefix, &remaining, bin_sums);
    mask |= 255u << shift;
    __syncthreads();
  }
  const uint32_t T = prefix;
  // Each thread walks its own run of pools in order; the pools at T before the run come from a
  // prefix count, so `chooser` (called on the run's pools in order) knows each one's tie rank.
  int b = 0, e = 0, ties = 0;
  const int ties_before =
      all_valid ? 0
                : run_prefix(
                      pools, [&](int i) { return int(keys[i] == T); }, &b, &e, &ties, warp_total);
  // Of the `ties` pools at T, the first `remaining` (the tie rule), or the last (flipped).
  const int first_tie = p.flip ? ties - remaining : 0;
  const auto chooser = [&, tie_rank = ties_before](int i) mutable {
    const uint32_t k = keys[i];
    if (all_valid) return int(k != 0u);
    const bool at_t = k == T;
    const bool chosen =
        k > T || (at_t && tie_rank >= first_tie && tie_rank < first_tie + remaining);
    tie_rank += at_t;
    return int(chosen);
  };
  int total = 0;
  int before = run_prefix(pools, chooser, &b, &e, &total, warp_total);
  auto pick = chooser;  // a fresh copy: the run's tie ranks from the start again
  for (int i = b; i < e; ++i)
    if (pick(i)) {
      for (int k = 0; k < kIndexKpool; ++k) out[before * kIndexKpool + k] = i * kIndexKpool + k;
      ++before;
    }
  const int tail0 = pools * kIndexKpool;
  for (int j = tail0 + threadIdx.x; j <= t; j += blockDim.x)
    out[total * kIndexKpool + j - tail0] = j;
  if (threadIdx.x == 0) p.counts[row] = total * kIndexKpool + (t + 1 - tail0);
}

// The multi-block path's per-row state, zeroed before the first pass.
struct WideRowState {
  uint32_t hist[4][256];  // per pass: valid keys matching the prefix, by the pass's byte
  uint32_t arrived[4];    // per pass: blocks of the row done adding
  int32_t valid;          // non-NaN pools (pass 0)
  uint32_t prefix;        // T's bytes found so far; T after pass 3
  int32_t remaining;      // pools still to take among those matching the prefix
  int32_t all_valid;      // valid <= topk: passes 1-3 skip (prefix = remaining = 0)
};

struct WideParams {
  SelectParams s;
  WideRowState* state;  // [rows]
  int32_t* above;       // [rows][kWideChunks] pools of the chunk above T (or valid, all_valid)
  int32_t* ties;        // [rows][kWideChunks] pools of the chunk at T
};

// Block (chunk, row)'s pools [begin, end) of the row's `pools`; live when the row is the
// multi-block path's and the chunk holds pools.
struct WideChunk {
  int t, pools, begin, end, chunks;
  bool live;
};

__device__ __forceinline__ WideChunk wide_chunk(const SelectParams& p) {
  WideChunk c;
  c.t = p.positions[blockIdx.y];
  c.pools = (c.t + 1) / kIndexKpool;
  c.begin = int(blockIdx.x) * kWidePools;
  c.end = min(c.pools, c.begin + kWidePools);
  c.chunks = (c.pools + kWidePools - 1) / kWidePools;
  c.live = wide_row(c.pools, p.topk) && c.begin < c.pools;
  return c;
}

// Grid: (chunks, rows); kWideThreads threads. Radix pass `pass` (byte 3 - pass of the key): the
// chunk's histogram into the row's; the row's last block to arrive picks the byte of T.
__global__ void __launch_bounds__(kWideThreads)
    wide_histogram_kernel(const __grid_constant__ WideParams p, int pass) {
  __shared__ uint32_t hist[256];
  __shared__ int warp_sums[kWideThreads / 32];
  __shared__ bool last;
  const WideChunk c = wide_chunk(p.s);
  if (!c.live) return;
  WideRowState& st = p.state[blockIdx.y];
  if (pass > 0 && st.all_valid) return;  // written by pass 0's launch
  const int shift = 24 - 8 * pass;
  const uint32_t mask = pass == 0 ? 0u : ~0u << (32 - 8 * pass);
  // Read before arriving: the row's last block rewrites the prefix only after every arrival.
  const uint32_t prefix = pass == 0 ? 0u : st.prefix;
  hist[threadIdx.x] = 0u;
  __syncthreads();
  const float* scores = p.s.scores + int64_t(blockIdx.y) * p.s.score_stride;
  int valid = 0;
  // Every lane runs every iteration (the bounds are the block's), as __match_any_sync needs. Nearly
  // all keys share their top byte, so lanes with the same bin add once, by their leader.
  for (int i0 = c.begin; i0 < c.end; i0 += kWideThreads) {
    const int i = i0 + int(threadIdx.x);
    const uint32_t k = i < c.end ? order_key(scores[i]) : 0u;
    valid += k != 0u;
    const bool take = k != 0u && (k & mask) == prefix;
    const uint32_t bin = take ? (k >> shift) & 255u : 256u;
    const unsigned peers = __match_any_sync(0xffffffffu, bin);
    if (take && int(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], __popc(peers));
  }
  __syncthreads();
  if (hist[threadIdx.x] != 0u) atomicAdd(&st.hist[pass][threadIdx.x], hist[threadIdx.x]);
  if (pass == 0) {
    int chunk_valid = 0;
    block_scan<kWideThreads>(valid, warp_sums, &chunk_valid);
    if (threadIdx.x == 0) atomicAdd(&st.valid, chunk_valid);
  }
  // The last block sees every block's adds: each made them visible before counting itself in.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&st.arrived[pass], 1u) == unsigned(c.chunks - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (pass == 0 && __ldcg(&st.valid) <= p.s.topk) {  // every valid pool: T = 0, none at T
    if (threadIdx.x == 0) st.all_valid = 1, st.prefix = 0u, st.remaining = 0;
    return;
  }
  const int remaining = pass == 0 ? p.s.topk : st.remaining;
  // Thread j holds bin 255 - j: its inclusive scan counts the keys in that bin and above, so
  // exactly one thread (a non-empty bin) holds the remaining-th largest key.
  const int bin = 255 - int(threadIdx.x);
  const int h = int(__ldcg(&st.hist[pass][bin]));
  int all = 0;
  const int incl = block_scan<kWideThreads>(h, warp_sums, &all);
  const int above = incl - h;
  if (above < remaining && incl >= remaining) {
    st.prefix = prefix | uint32_t(bin) << shift;
    st.remaining = remaining - above;
  }
}

// Grid: (chunks, rows); kWideThreads threads. The chunk's pools above T and at T.
__global__ void __launch_bounds__(kWideThreads)
    wide_count_kernel(const __grid_constant__ WideParams p) {
  __shared__ int warp_sums[kWideThreads / 32];
  const WideChunk c = wide_chunk(p.s);
  if (!c.live) return;
  const uint32_t T = p.state[blockIdx.y].prefix;
  const float* scores = p.s.scores + int64_t(blockIdx.y) * p.s.score_stride;
  int up = 0, at = 0;
  for (int i = c.begin + int(threadIdx.x); i < c.end; i += kWideThreads) {
    const uint32_t k = order_key(scores[i]);
    up += k > T;
    at += k == T;
  }
  int up_total = 0, at_total = 0;
  block_scan<kWideThreads>(up, warp_sums, &up_total);
  block_scan<kWideThreads>(at, warp_sums, &at_total);
  if (threadIdx.x == 0) {
    p.above[int64_t(blockIdx.y) * kWideChunks + blockIdx.x] = up_total;
    p.ties[int64_t(blockIdx.y) * kWideChunks + blockIdx.x] = at_total;
  }
}

// Grid: (chunks, rows); kWideThreads threads. A pool is chosen when above T, or at T with fewer
// than `remaining` pools at T before it (flipped: at least at_all - remaining); its slot is the
// chosen pools before it: those above T plus the chosen ones at T before it. Chunk 0 also writes
// the tail and the count.
__global__ void __launch_bounds__(kWideThreads)
    wide_write_kernel(const __grid_constant__ WideParams p) {
  __shared__ int warp_sums[kWideThreads / 32];
  const WideChunk c = wide_chunk(p.s);
  if (!c.live) return;
  const int64_t row = blockIdx.y;
  const uint32_t T = p.state[row].prefix;
  const int remaining = p.state[row].remaining;
  int up_before = 0, at_before = 0, up_all = 0, at_all = 0;
  for (int j = int(threadIdx.x); j < c.chunks; j += kWideThreads) {
    const int u = p.above[row * kWideChunks + j], a = p.ties[row * kWideChunks + j];
    if (j < int(blockIdx.x)) up_before += u, at_before += a;
    up_all += u;
    at_all += a;
  }
  block_scan<kWideThreads>(up_before, warp_sums, &up_before);
  block_scan<kWideThreads>(at_before, warp_sums, &at_before);
  // Of the row's pools at T, the first `remaining` (the tie rule), or the last (flipped: only
  // then does a block need the row's count of them; p.s.flip is the same for every thread).
  int first_tie = 0;
  if (p.s.flip) {
    int ties = 0;
    block_scan<kWideThreads>(at_all, warp_sums, &ties);
    first_tie = ties - remaining;
  }
  const float* scores = p.s.scores + row * p.s.score_stride;
  int32_t* out = p.s.out + row * p.s.out_stride;
  // Per tile, one scan of (at T) << 16 | (above T): a tile has at most 256 of each.
  for (int i0 = c.begin; i0 < c.end; i0 += kWideThreads) {
    const int i = i0 + int(threadIdx.x);
    const uint32_t k = i < c.end ? order_key(scores[i]) : 0u;
    const bool up = i < c.end && k > T, at = i < c.end && k == T;
    const int v = (int(at) << 16) | int(up);
    int tile = 0;
    const int excl = block_scan<kWideThreads>(v, warp_sums, &tile) - v;
    const int ties_before = at_before + (excl >> 16);
    if (up || (at && ties_before >= first_tie && ties_before < first_tie + remaining)) {
      const int slot =
          up_before + (excl & 0xffff) + min(max(ties_before - first_tie, 0), remaining);
      for (int j = 0; j < kIndexKpool; ++j) out[slot * kIndexKpool + j] = i * kIndexKpool + j;
    }
    up_before += tile & 0xffff;
    at_before += tile >> 16;
  }
  if (blockIdx.x != 0) return;
  block_scan<kWideThreads>(up_all, warp_sums, &up_all);
  block_scan<kWideThreads>(at_all, warp_sums, &at_all);
  const int total = up_all + min(at_all, remaining);
  const int tail0 = c.pools * kIndexKpool;
  for (int j = tail0 + int(threadIdx.x); j <= c.t; j += kWideThreads)
    out[total * kIndexKpool + j - tail0] = j;
  if (threadIdx.x == 0) p.s.counts[row] = total * kIndexKpool + (c.t + 1 - tail0);
}

}  // namespace

size_t dsa_select_workspace_bytes(int64_t rows, int64_t max_pools) {
  if (rows <= 0 || max_pools <= kSelectCachedPools) return 0;
  return size_t(rows) * (sizeof(WideRowState) + 2 * sizeof(int32_t) * kWideChunks);
}

void dsa_select(const float* scores, int64_t score_stride, const int32_t* positions, int64_t rows,
                int64_t max_pools, int topk_pools, int32_t* out, int64_t out_stride,
                int32_t* counts, void* workspace, cudaStream_t stream, bool tie_flipped) {
  if (rows <= 0) return;
  SPARKGLM_ASSERT(max_pools <= score_stride && max_pools <= kIndexMaxPools,
                  "dsa_select: max_pools above the score stride or kIndexMaxPools");
  const SelectParams s{scores,     score_stride, positions,  out,
                       out_stride, counts,       topk_pools, tie_flipped};
  constexpr size_t kSmem = size_t(kSelectCachedPools) * sizeof(uint32_t);
  static bool configured = false;
  if (!configured) {
    SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(
        select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    configured = true;
  }
  launch_dependent(select_kernel, unsigned(rows), kSelectThreads, kSmem, stream, s);
  if (max_pools <= kSelectCachedPools || max_pools <= topk_pools) return;  // no row is wide

  SPARKGLM_ASSERT(workspace != nullptr && rows <= 65535,
                  "dsa_select: rows beyond 16,384 pools need dsa_select_workspace_bytes of "
                  "workspace, and at most 65,535 rows a call");
  auto* state = static_cast<WideRowState*>(workspace);
  auto* above = reinterpret_cast<int32_t*>(state + rows);
  const WideParams w{s, state, above, above + rows * kWideChunks};
  SPARKGLM_CUDA_CHECK(cudaMemsetAsync(state, 0, size_t(rows) * sizeof(WideRowState), stream));
  const dim3 grid(unsigned((max_pools + kWidePools - 1) / kWidePools), unsigned(rows));
  for (int pass = 0; pass < 4; ++pass) {
    wide_histogram_kernel<<<grid, kWideThreads, 0, stream>>>(w, pass);
    SPARKGLM_CUDA_CHECK(cudaGetLastError());
  }
  wide_count_kernel<<<grid, kWideThreads, 0, stream>>>(w);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  wide_write_kernel<<<grid, kWideThreads, 0, stream>>>(w);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::cuda
