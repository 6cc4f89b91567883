#include "engine/backend/cuda/mla_decode.h"

#include <cmath>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/pdl.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

constexpr int kHeadsPerBlock = 16;  // the MMA's 16 rows
constexpr int kTile = 32;           // tokens per shared-memory tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kPLd = kTile + 8;

// The kernels are templates over R with two instantiations (mla_decode.h): kMlaLatentDim, whose
// heads come in whole groups of 16, and kMlaMicroLatentDim, whose heads (4 in tinyglm-micro) pad
// the MMA's 16 rows with zero queries whose results are never stored (kMaskHeads). Everything
// below follows from R, so the production instantiation is the code of the single-R kernels.
template <int kR>
struct MlaShape {
  static constexpr int kLd = kR + 8;  // BF16 row stride: fragment loads of 8 rows hit 32 banks
  static constexpr int kColsPerWarp = kR / kWarps;  // ō columns a warp owns in the PV product
  static constexpr int kNTiles = kColsPerWarp / 8;
  static constexpr size_t kSmemBytes =
      sizeof(uint16_t) * (kHeadsPerBlock * kLd + kTile * kLd + kHeadsPerBlock * kPLd) +
      sizeof(float) * (kHeadsPerBlock * (kTile + 1) + kHeadsPerBlock);
  static_assert(kNTiles >= 1 && kR % 64 == 0, "mla_decode: R must be a multiple of 64");
};

int num_splits(int max_len) {
  return max_len <= 0 ? 1 : (max_len + kMlaSplitTokens - 1) / kMlaSplitTokens;
}

__device__ __forceinline__ uint32_t ld32(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Tile entries [0, count) of the row's list as BF16 into c ([kTile, kLd]); fp8_g128 values are
// dequantized (E4M3 * scale) and rounded to BF16. Unused slots are zero: their probability is 0
// and 0 * NaN would be NaN. The 32 record addresses are resolved first (list -> block table ->
// page, two dependent reads) so that each thread's record loads are then all independent.
template <int kR, bool kBf16>
__device__ void load_tile(const MlaDecodeArgs& a, int row, int first, int count, uint16_t* c,
                          const uint8_t** records) {
  constexpr int kLd = MlaShape<kR>::kLd;
  constexpr int64_t kRec = kBf16 ? kR * 2 : kR + 4 * (kR / 128);
  constexpr int kChunks = kBf16 ? kR / 8 : kR / 16;  // 16-byte chunks of a record
  constexpr int kPerThread = kTile * kChunks / kThreads;
  if (threadIdx.x < kTile) {
    const int j = threadIdx.x;
    const uint8_t* r = nullptr;
    if (j < count) {
      const int entry = first + j;
      const int pos = a.attended ? a.attended[int64_t(row) * a.max_len + entry] : entry;
      const int block = a.block_table[int64_t(row) * a.table_stride + pos / a.block_size];
      r = a.pages + (int64_t(block) * a.block_size + pos % a.block_size) * kRec;
    }
    records[j] = r;
  }
  __syncthreads();
  uint4 v[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = threadIdx.x + i * kThreads, j = idx / kChunks, ch = idx % kChunks;
    v[i] =
        records[j] ? *reinterpret_cast<const uint4*>(records[j] + ch * 16) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int idx = threadIdx.x + i * kThreads, j = idx / kChunks, ch = idx % kChunks;
    uint4* dst = reinterpret_cast<uint4*>(c + j * kLd + ch * (kBf16 ? 8 : 16));
    if (kBf16) {
      dst[0] = v[i];
      continue;
    }
    const float s =
        records[j] ? *reinterpret_cast<const float*>(records[j] + kR + 4 * (ch * 16 / 128)) : 0.0f;
    const uint32_t u[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
    uint32_t packed[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float lo = e4m3_to_f32(uint8_t(u[e / 2] >> (16 * (e % 2)))) * s;
      const float hi = e4m3_to_f32(uint8_t(u[e / 2] >> (16 * (e % 2) + 8))) * s;
      packed[e] = uint32_t(f32_to_bf16_bits(lo)) | (uint32_t(f32_to_bf16_bits(hi)) << 16);
    }
    dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
}

// Grid: (splits, H / 16, B). Tensor-core flash decode over one split of the row's list: per tile,
// S = q~ C^T (16 heads x 32 tokens, k = R), an online softmax per head, then ō += P C. Writes the
// split's unnormalised ō with its running max and sum, or, where the launch has one split, the
// row's ō as combine_kernel would make it from them.
template <int kR, bool kMaskHeads>
__global__ void __launch_bounds__(kThreads) split_kernel(const __grid_constant__ MlaDecodeArgs a) {
  constexpr int kLd = MlaShape<kR>::kLd, kColsPerWarp = MlaShape<kR>::kColsPerWarp;
  constexpr int kNTiles = MlaShape<kR>::kNTiles;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint16_t* q = reinterpret_cast<uint16_t*>(smem_raw);  // [16, kLd] BF16 q~
  uint16_t* c = q + kHeadsPerBlock * kLd;               // [kTile, kLd] BF16 latents
  uint16_t* pr = c + kTile * kLd;                       // [16, kPLd] BF16 probabilities
  float* sc = reinterpret_cast<float*>(pr + kHeadsPerBlock * kPLd);  // [16, kTile + 1] scores
  float* alpha_s = sc + kHeadsPerBlock * (kTile + 1);                // [16]
  __shared__ const uint8_t* records[kTile];  // the tile's record addresses (null: unused slot)
  pdl_wait();                                // q~ of the kernel ahead, the step's latents
  pdl_trigger();
  const int split = blockIdx.x, h0 = blockIdx.y * kHeadsPerBlock, row = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int len = a.lengths[row];
  const int begin = split * kMlaSplitTokens;
  const int end = min(len, begin + kMlaSplitTokens);

  {  // q~ of the block's 16 heads, every load issued before the first is used.
    constexpr int kPerThread = kHeadsPerBlock * kR / 4 / kThreads;
    const float4* src =
        reinterpret_cast<const float4*>(a.q_tilde + (int64_t(row) * a.heads + h0) * kR);
    float4 v[kPerThread];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      if constexpr (kMaskHeads) {  // padded heads (past a.heads) read as zero
        const int idx = threadIdx.x + i * kThreads;
        v[i] = h0 + idx * 4 / kR < a.heads ? src[idx] : make_float4(0, 0, 0, 0);
      } else {
        v[i] = src[threadIdx.x + i * kThreads];
      }
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int e = (threadIdx.x + i * kThreads) * 4;
      uint16_t* d = q + (e / kR) * kLd + e % kR;
      d[0] = f32_to_bf16_bits(v[i].x), d[1] = f32_to_bf16_bits(v[i].y);
      d[2] = f32_to_bf16_bits(v[i].z), d[3] = f32_to_bf16_bits(v[i].w);
    }
  }

  float m_run[kHeadsPerBlock / kWarps], l_run[kHeadsPerBlock / kWarps];  // this warp's heads
#pragma unroll
  for (int i = 0; i < kHeadsPerBlock / kWarps; ++i) m_run[i] = -INFINITY, l_run[i] = 0.0f;
  float o[kNTiles][4];  // ō[16 heads, this warp's 128 columns] as MMA accumulators
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  for (int first = begin; first < end; first += kTile) {
    const int count = min(kTile, end - first);
    __syncthreads();  // the previous tile is consumed (and q is written, on the first pass)
    if (kR != kMlaLatentDim || a.format == LatentFormat::kBF16) {  // fp8_g128: R = 512 only
      load_tile<kR, true>(a, row, first, count, c, records);
    } else {
      load_tile<kR, false>(a, row, first, count, c, records);
    }
    __syncthreads();
    {  // Scores: warp w takes tokens 8w .. 8w+7.
      float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const uint16_t* cr = c + (warp * 8 + g) * kLd + 2 * t;
#pragma unroll 8
      for (int k0 = 0; k0 < kR; k0 += 16) {
        mma_bf16(s, ld32(q + g * kLd + k0 + 2 * t), ld32(q + (g + 8) * kLd + k0 + 2 * t),
                 ld32(q + g * kLd + k0 + 8 + 2 * t), ld32(q + (g + 8) * kLd + k0 + 8 + 2 * t),
                 ld32(cr + k0), ld32(cr + k0 + 8));
      }
      const int j = warp * 8 + 2 * t;
      sc[g * (kTile + 1) + j] = a.scale * s[0];
      sc[g * (kTile + 1) + j + 1] = a.scale * s[1];
      sc[(g + 8) * (kTile + 1) + j] = a.scale * s[2];
      sc[(g + 8) * (kTile + 1) + j + 1] = a.scale * s[3];
    }
    __syncthreads();
    // Online softmax: warp w owns heads 4w .. 4w+3, lane = token. The sum uses the BF16-rounded
    // probabilities that the PV product multiplies, so ō stays a convex combination.
#pragma unroll
    for (int i = 0; i < kHeadsPerBlock / kWarps; ++i) {
      const int h = warp * (kHeadsPerBlock / kWarps) + i;
      const float sv = lane < count ? sc[h * (kTile + 1) + lane] : -INFINITY;
      const float m_new = fmaxf(m_run[i], warp_max(sv));
      const uint16_t pb = lane < count ? f32_to_bf16_bits(expf(sv - m_new)) : uint16_t(0);
      const float alpha = expf(m_run[i] - m_new);  // 0 on the first tile (m = -inf)
      l_run[i] = l_run[i] * alpha + warp_sum(bf16_bits_to_f32(pb));
      m_run[i] = m_new;
      pr[h * kPLd + lane] = pb;
      if (lane == 0) alpha_s[h] = alpha;
    }
    __syncthreads();
    {  // ō = alpha ō + P C over this warp's 128 columns.
      const float al = alpha_s[g], ah = alpha_s[g + 8];
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) o[n][0] *= al, o[n][1] *= al, o[n][2] *= ah, o[n][3] *= ah;
#pragma unroll
      for (int k0 = 0; k0 < kTile; k0 += 16) {
        const uint32_t a0 = ld32(pr + g * kPLd + k0 + 2 * t);
        const uint32_t a1 = ld32(pr + (g + 8) * kPLd + k0 + 2 * t);
        const uint32_t a2 = ld32(pr + g * kPLd + k0 + 8 + 2 * t);
        const uint32_t a3 = ld32(pr + (g + 8) * kPLd + k0 + 8 + 2 * t);
        const uint16_t* c0 = c + (k0 + 2 * t) * kLd + warp * kColsPerWarp + g;
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) {
          const uint16_t* cn = c0 + n * 8;
          const uint32_t b0 = uint32_t(cn[0]) | (uint32_t(cn[kLd]) << 16);
          const uint32_t b1 = uint32_t(cn[8 * kLd]) | (uint32_t(cn[9 * kLd]) << 16);
          mma_bf16(o[n], a0, a1, a2, a3, b0, b1);
        }
      }
    }
  }
  const int splits = gridDim.x;
  const bool lo = !kMaskHeads || h0 + g < a.heads, hi = !kMaskHeads || h0 + g + 8 < a.heads;
  if (splits == 1) {
    // One split (every list of the launch fits one): combine_kernel's arithmetic for a row of one
    // used split, here, so the launch needs no second kernel and the bits are combine_kernel's:
    // its maximum fmaxf(-inf, m), factor expf(m - max), sum fmaf(l, factor, 0) + 0 (the warp sum
    // adds zeros) and ō fmaf(o, factor, 0) / sum; an empty row (no used split) gives 0.
    __syncthreads();  // every warp is done with alpha_s and sc
    float* sum_s = sc;
    if (lane == 0) {
#pragma unroll
      for (int i = 0; i < kHeadsPerBlock / kWarps; ++i) {
        const int h = warp * (kHeadsPerBlock / kWarps) + i;
        const float f = expf(m_run[i] - fmaxf(-INFINITY, m_run[i]));
        alpha_s[h] = f;
        sum_s[h] = len > 0 ? __fadd_rn(fmaf(l_run[i], f, 0.0f), 0.0f) : 0.0f;
      }
    }
    __syncthreads();
    auto out = [&](int h, int e, float v) {
      const float l = sum_s[h];
      a.o_bar[(int64_t(row) * a.heads + h0 + h) * kR + e] =
          l > 0.0f ? fmaf(v, alpha_s[h], 0.0f) / l : 0.0f;
    };
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      const int e = warp * kColsPerWarp + n * 8 + 2 * t;
      if (lo) out(g, e, o[n][0]), out(g, e + 1, o[n][1]);
      if (hi) out(g + 8, e, o[n][2]), out(g + 8, e + 1, o[n][3]);
    }
    return;
  }
  // Workspace: [B, H, splits] of (R partial values, max, sum).
  auto slot = [&](int h) {
    return a.workspace + ((int64_t(row) * a.heads + h0 + h) * splits + split) * (kR + 2);
  };
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) {
    const int e = warp * kColsPerWarp + n * 8 + 2 * t;
    if (lo) {
      slot(g)[e] = o[n][0];
      slot(g)[e + 1] = o[n][1];
    }
    if (hi) {
      slot(g + 8)[e] = o[n][2];
      slot(g + 8)[e + 1] = o[n][3];
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < kHeadsPerBlock / kWarps; ++i) {
      const int h = warp * (kHeadsPerBlock / kWarps) + i;
      if (kMaskHeads && h0 + h >= a.heads) continue;
      float* w = slot(h);
      w[kR] = m_run[i];
      w[kR + 1] = l_run[i];
    }
  }
}

// Grid: (H, B); block: R threads. Merges the splits of one (row, head) in increasing order. The
// per-split maxima and sums go through shared memory once, so the merge is two passes of
// independent loads rather than chains of dependent ones.
constexpr int kMaxSplits = 64;  // rows of up to 8192 entries; longer lists merge in rounds

template <int kR>
__global__ void __launch_bounds__(kR)
    combine_kernel(const __grid_constant__ MlaDecodeArgs a, int splits) {
  __shared__ float factor[kMaxSplits];
  __shared__ float total;
  pdl_wait();
  pdl_trigger();
  const int h = blockIdx.x, row = blockIdx.y, e = threadIdx.x;
  const float* w = a.workspace + (int64_t(row) * a.heads + h) * splits * (kR + 2);
  const int used = min(splits, (a.lengths[row] + kMlaSplitTokens - 1) / kMlaSplitTokens);
  float o = 0.0f, l = 0.0f;
  for (int s0 = 0; s0 < used; s0 += kMaxSplits) {
    const int n = min(kMaxSplits, used - s0);
    if (threadIdx.x < 32) {
      float m = -INFINITY;
      for (int s = threadIdx.x; s < used; s += 32) m = fmaxf(m, w[s * (kR + 2) + kR]);
      m = warp_max(m);
      float part = 0.0f;
      for (int s = threadIdx.x; s < n; s += 32) {
        const float f = expf(w[(s0 + s) * (kR + 2) + kR] - m);
        factor[s] = f;
        part = fmaf(w[(s0 + s) * (kR + 2) + kR + 1], f, 0.0f) + part;
      }
      part = warp_sum(part);
      if (threadIdx.x == 0) total = part;
    }
    __syncthreads();
    l += total;
#pragma unroll 8
    for (int s = 0; s < n; ++s) o = fmaf(w[(s0 + s) * (kR + 2) + e], factor[s], o);
    __syncthreads();
  }
  // An empty row (length 0) attends nothing: ō = 0 rather than 0/0.
  a.o_bar[(int64_t(row) * a.heads + h) * kR + e] = l > 0.0f ? o / l : 0.0f;
}

template <int kR, bool kMaskHeads>
void launch_decode(const MlaDecodeArgs& a, cudaStream_t stream) {
  constexpr size_t kSmemBytes = MlaShape<kR>::kSmemBytes;
  static bool configured = false;  // the attribute is per function; setting it twice is harmless
  if (!configured) {
    SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(split_kernel<kR, kMaskHeads>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             int(kSmemBytes)));
    configured = true;
  }
  const int splits = num_splits(a.max_len);
  const dim3 grid(unsigned(splits), unsigned((a.heads + kHeadsPerBlock - 1) / kHeadsPerBlock),
                  unsigned(a.rows));
  launch_dependent(split_kernel<kR, kMaskHeads>, grid, kThreads, kSmemBytes, stream, a);
  if (splits > 1)  // one split writes ō itself
    launch_dependent(combine_kernel<kR>, dim3(unsigned(a.heads), unsigned(a.rows)), kR, 0, stream,
                     a, splits);
}

}  // namespace

void check_latent_geometry(int latent_dim, LatentFormat format) {
  if (latent_dim != kMlaLatentDim && latent_dim != kMlaMicroLatentDim)
    throw Error(ErrorKind::kUnsupported, "MLA kernels: kv_lora_rank " + std::to_string(latent_dim) +
                                             " (served: " + std::to_string(kMlaLatentDim) + ", " +
                                             std::to_string(kMlaMicroLatentDim) + ")");
  if (latent_dim != kMlaLatentDim && format != LatentFormat::kBF16)
    throw Error(ErrorKind::kUnsupported,
                "MLA kernels: --kv-cache-dtype fp8_g128 needs kv_lora_rank " +
                    std::to_string(kMlaLatentDim) + " (got " + std::to_string(latent_dim) +
                    ": its records would not be 16-byte aligned); use bf16");
}

int64_t mla_decode_workspace_floats(int rows, int heads, int max_len, int latent_dim) {
  return int64_t(rows) * heads * num_splits(max_len) * (latent_dim + 2);
}

void mla_decode(const MlaDecodeArgs& a, cudaStream_t stream) {
  check_latent_geometry(a.latent_dim, a.format);
  SPARKGLM_ASSERT(a.heads > 0 && a.block_size > 0 && a.rows <= 65535 &&
                      (a.latent_dim != kMlaLatentDim || a.heads % kHeadsPerBlock == 0),
                  "mla_decode: heads must be a multiple of 16 at R = 512 and block_size positive");
  if (a.rows <= 0) return;
  if (a.latent_dim == kMlaLatentDim) {
    launch_decode<kMlaLatentDim, false>(a, stream);
  } else {
    launch_decode<kMlaMicroLatentDim, true>(a, stream);
  }
}

}  // namespace sparkglm::cuda
