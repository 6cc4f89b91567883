#include "engine/backend/cuda/sampling_topk_topp.h"

#include "engine/runtime/sampler.h"

#include "engine/backend/cuda/cuda_check.h"

namespace sparkglm::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kBlock = 256;  // the CPU draw's block of tokens (sampler.cpp kBlock)
constexpr unsigned kFull = 0xffffffffu;

// runtime/sampler.cpp's sampling_uniform and exp_nonpositive, step for step. The _rn intrinsics
// keep nvcc from contracting a multiply and an add into an FMA, which the CPU build never does.
__device__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__device__ double uniform(uint64_t seed, uint64_t index) {
  const uint64_t z =
      mix64(mix64(seed ^ 0x2545f4914f6cdd1dull) + 0x9e3779b97f4a7c15ull * (index + 1));
  return double(z >> 11) * 0x1.0p-53;
}

__device__ float exp_nonpositive(float z) {
  const float zc = z < -87.0f ? -87.0f : z;
  const float n = __fsub_rn(__fadd_rn(__fmul_rn(zc, 1.44269504f), 12582912.0f), 12582912.0f);
  const float r =
      __fsub_rn(__fsub_rn(zc, __fmul_rn(n, 0.693359375f)), __fmul_rn(n, -2.12194440e-4f));
  float p = 1.0f / 5040.0f;
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 720.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 120.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 24.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 6.0f);
  p = __fadd_rn(__fmul_rn(p, r), 0.5f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  const float scale = __int_as_float((int32_t(n) + 127) << 23);
  return z < -87.0f ? 0.0f : __fmul_rn(p, scale);
}

struct Shared {
  double hist[16][kWarps];
  int64_t counts[kThreads];
  float fmax[kWarps];
  int64_t pick_thread, pick_rank;
  uint64_t key;
};

// Sums each of the 16 bins over the block in a fixed order (xor butterfly inside a warp leaves the
// same value in every lane, then warps in order), so every thread gets the same bits every run.
__device__ void block_sum16(double (&acc)[16], Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    for (int m = 16; m > 0; m >>= 1) acc[j] += __shfl_xor_sync(kFull, acc[j], m);
    if (lane == 0) sh.hist[j][warp] = acc[j];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    double s = 0.0;
    for (int v = 0; v < kWarps; ++v) s += sh.hist[j][v];
    acc[j] = s;
  }
  __syncthreads();
}

__device__ double block_sum(double v, Shared& sh) {
  double acc[16] = {v};
  block_sum16(acc, sh);
  return acc[0];
}

// The filters' eligible tokens: positive weight and order key >= `lower` (0: every positive one).
__device__ __forceinline__ bool eligible(float wi, int64_t i, uint32_t lower_w, uint32_t lower_id) {
  if (!(wi > 0.0f)) return false;
  const uint32_t b = __float_as_uint(wi);
  return b > lower_w || (b == lower_w && uint32_t(i) <= lower_id);
}

// The key of the first token, walking eligible tokens in key order (larger w first, ties by lower
// id), at which the running total of `value` (1 per token, or its weight when `mass`) reaches
// `need`; the last token when it never does (rounding). Radix descent on the weight bits, 4 bits a
// pass, then a scan of the tied weight's ids.
__device__ uint64_t descend(const float* w, int64_t vocab, uint64_t lower, bool mass, double need,
                            Shared& sh) {
  const uint32_t lower_w = uint32_t(lower >> 32), lower_id = lower ? ~uint32_t(lower) : ~0u;
  uint32_t known = 0, mask = 0;
  double above = 0.0;
  for (int shift = 28; shift >= 0; shift -= 4) {
    double acc[16] = {};
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float wi = w[i];
      if (!eligible(wi, i, lower_w, lower_id)) continue;
      const uint32_t b = __float_as_uint(wi);
      if ((b & mask) != known) continue;
      const double v = mass ? double(wi) : 1.0;
      const uint32_t d = (b >> shift) & 15u;
#pragma unroll
      for (int j = 0; j < 16; ++j) acc[j] += d == uint32_t(j) ? v : 0.0;
    }
    block_sum16(acc, sh);
    int chosen = -1, last = 0;
    double above_last = above;
    for (int j = 15; j >= 0; --j) {
      if (acc[j] == 0.0) continue;
      last = j;
      above_last = above;
      if (above + acc[j] >= need) {
        chosen = j;
        break;
      }
      above += acc[j];
    }
    if (chosen < 0) chosen = last, above = above_last;
    known |= uint32_t(chosen) << shift;
    mask |= 15u << shift;
  }
  // Tokens of weight bits `known`, in id order: contiguous chunks per thread, counted and scanned.
  const int64_t chunk = (vocab + kThreads - 1) / kThreads;
  const int64_t lo = int64_t(threadIdx.x) * chunk, hi = min(vocab, lo + chunk);
  int64_t count = 0;
  for (int64_t i = lo; i < hi; ++i)
    count += eligible(w[i], i, lower_w, lower_id) && __float_as_uint(w[i]) == known;
  sh.counts[threadIdx.x] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t total = 0;
    for (int t = 0; t < kThreads; ++t) total += sh.counts[t];
    int64_t rank = total;  // 1-based rank of the cut among the ties
    if (!mass) {
      const double r = need - above;
      rank = r >= double(total) ? total : max(int64_t(1), int64_t(r));
    } else {
      const double tie = double(__uint_as_float(known));
      double run = above;
      for (int64_t r = 1; r <= total; ++r) {
        run += tie;
        if (run >= need) {
          rank = r;
          break;
        }
      }
    }
    sh.key = 0;
    int t = 0;
    while (t + 1 < kThreads && rank > sh.counts[t]) rank -= sh.counts[t++];
    sh.pick_thread = t;
    sh.pick_rank = rank;
  }
  __syncthreads();
  if (threadIdx.x == sh.pick_thread) {
    int64_t rank = sh.pick_rank;
    for (int64_t i = lo; i < hi; ++i)
      if (eligible(w[i], i, lower_w, lower_id) && __float_as_uint(w[i]) == known && --rank == 0) {
        sh.key = (uint64_t(known) << 32) | uint64_t(~uint32_t(i));
        break;
      }
  }
  __syncthreads();
  const uint64_t key = sh.key;
  __syncthreads();
  return key;
}

// Grid: rows. weights: [rows, vocab] scratch; block_sums: [rows, ceil(vocab / 256)] scratch.
__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, int64_t vocab, const SampleParams* params, float* weights,
                  double* block_sums, int32_t* tokens) {
  __shared__ Shared sh;
  const int64_t row = blockIdx.x;
  const float* x = logits + row * vocab;
  float* w = weights + row * vocab;
  const int64_t n_blocks = (vocab + kBlock - 1) / kBlock;
  double* bs = block_sums + row * n_blocks;
  const SampleParams p = params[row];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  float m = -INFINITY;  // NaN compares false, so it counts as -inf
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) m = x[i] > m ? x[i] : m;
  for (int s = 16; s > 0; s >>= 1) m = fmaxf(m, __shfl_xor_sync(kFull, m, s));
  if (lane == 0) sh.fmax[warp] = m;
  __syncthreads();
  for (int v = 0; v < kWarps; ++v) m = fmaxf(m, sh.fmax[v]);
  if (m == -INFINITY) {
    if (threadIdx.x == 0) tokens[row] = -1;
    return;
  }
  if (p.temperature == 0.0f) {  // greedy: the first maximum
    double first = double(vocab);
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
      if (x[i] == m) {
        first = double(i);
        break;
      }
    for (int s = 16; s > 0; s >>= 1) first = fmin(first, __shfl_xor_sync(kFull, first, s));
    __syncthreads();
    if (lane == 0) sh.hist[0][warp] = first;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int v = 0; v < kWarps; ++v) first = fmin(first, sh.hist[0][v]);
      tokens[row] = int32_t(first);
    }
    return;
  }

  // softmax(x / T) up to the factor p_max, as the CPU computes it.
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float xi = isnan(x[i]) ? -INFINITY : x[i];
    w[i] = m == INFINITY ? (xi == INFINITY ? 1.0f : 0.0f)
                         : exp_nonpositive(__fdiv_rn(__fsub_rn(xi, m), p.temperature));
  }
  __syncthreads();

  uint64_t threshold = uint64_t(__float_as_uint(p.min_p)) << 32;
  const int64_t k = p.top_k > 0 && p.top_k < vocab ? p.top_k : 0;
  uint64_t lower = 0;
  if (k > 0) {
    double positives = 0.0;
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) positives += w[i] > 0.0f ? 1.0 : 0.0;
    if (block_sum(positives, sh) >= double(k)) {
      lower = descend(w, vocab, 0, false, double(k), sh);
      threshold = max(threshold, lower);
    }
  }
  if (p.top_p < 1.0f) {
    const uint32_t lower_w = uint32_t(lower >> 32), lower_id = lower ? ~uint32_t(lower) : ~0u;
    double mass = 0.0;
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
      mass += eligible(w[i], i, lower_w, lower_id) ? double(w[i]) : 0.0;
    mass = block_sum(mass, sh);
    threshold = max(threshold, descend(w, vocab, lower, true, double(p.top_p) * mass, sh));
  }
  if (threshold > 0) {
    const float cut_w = __uint_as_float(uint32_t(threshold >> 32));
    const int64_t cut_id = int64_t(uint32_t(~threshold));
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float wi = w[i];
      if (!(wi >= cut_w) || (i > cut_id && wi == cut_w)) w[i] = 0.0f;
    }
  }
  __syncthreads();

  // Block sums in the CPU's sum_of order: 8 interleaved lanes, then lanes left to right, then the
  // tail. One warp per block, lanes 0-7 busy.
  for (int64_t b = warp; b < n_blocks; b += kWarps) {
    const int64_t lo = b * kBlock, n = min(kBlock, vocab - lo), full = n - n % 8;
    double part = 0.0;
    if (lane < 8)
      for (int64_t i = lane; i < full; i += 8) part += double(w[lo + i]);
    double s = 0.0;
    for (int j = 0; j < 8; ++j) s += __shfl_sync(kFull, part, j);
    if (lane == 0) {
      for (int64_t i = full; i < n; ++i) s += double(w[lo + i]);
      bs[b] = s;
    }
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  double total = 0.0;
  for (int64_t b = 0; b < n_blocks; ++b) total += bs[b];
  const double target = uniform(p.seed, p.index) * total;
  double cumulative = 0.0;
  int64_t b = 0;
  while (b + 1 < n_blocks && cumulative + bs[b] <= target) cumulative += bs[b++];
  const int64_t lo = b * kBlock, hi = min(vocab, lo + kBlock);
  int64_t last = -1;
  for (int64_t i = lo; i < hi; ++i) {
    if (!(w[i] > 0.0f)) continue;
    last = i;
    cumulative += double(w[i]);
    if (cumulative > target) break;
  }
  for (int64_t i = lo - 1; last < 0 && i >= 0; --i)
    if (w[i] > 0.0f) last = i;
  tokens[row] = int32_t(last);
}

size_t weights_bytes(int64_t rows, int64_t vocab) {
  return (size_t(rows * vocab) * sizeof(float) + 7) / 8 * 8;
}

}  // namespace

size_t sample_scratch_bytes(int64_t rows, int64_t vocab) {
  return weights_bytes(rows, vocab) + size_t(rows * ((vocab + kBlock - 1) / kBlock)) * 8;
}

void sample_top_k_top_p(const float* logits, int64_t rows, int64_t vocab,
                        const SampleParams* params, void* scratch, int32_t* tokens,
                        cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return;
  auto* w = static_cast<float*>(scratch);
  auto* bs = reinterpret_cast<double*>(static_cast<char*>(scratch) + weights_bytes(rows, vocab));
  sample_kernel<<<unsigned(rows), kThreads, 0, stream>>>(logits, vocab, params, w, bs, tokens);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

int32_t cpu_sampler_token(const SampleParams& s, const float* logits, int64_t vocab) {
  SamplingParams params;
  params.temperature = s.temperature;
  params.top_k = s.top_k;
  params.top_p = s.top_p;
  params.min_p = s.min_p;
  params.seed = s.seed;
  SequenceSampler sampler(params, {}, 0);
  // Accepted tokens only advance the draw counter while penalties are off.
  for (uint64_t i = 0; i < s.index; ++i) sampler.accept(0);
  return sampler.sample(logits, vocab, {}).token;
}

}  // namespace sparkglm::cuda
