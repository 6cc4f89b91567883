#include "engine/backend/cuda/mla_prefill.h"

#include <cmath>
#include <string>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_math.cuh"
#include "engine/core/error.h"

namespace sparkglm::cuda {

namespace {

size_t round_up(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Grid: T. Row t: length start + t + 1 and its own copy of the sequence's block table.
__global__ void rows_kernel(int start, const int32_t* table, int table_len, int32_t* lengths,
                            int32_t* tables) {
  const int t = int(blockIdx.x);
  if (threadIdx.x == 0) lengths[t] = start + t + 1;
  for (int i = int(threadIdx.x); i < table_len; i += int(blockDim.x))
    tables[int64_t(t) * table_len + i] = table[i];
}

// The first path: one decode row per query row.
void prefill_by_decode(const MlaPrefillArgs& a, cudaStream_t stream) {
  auto* base = static_cast<char*>(a.workspace);
  auto* lengths = reinterpret_cast<int32_t*>(base);
  auto* tables = reinterpret_cast<int32_t*>(base + round_up(size_t(a.rows) * 4));
  auto* ws = reinterpret_cast<float*>(base + round_up(size_t(a.rows) * 4) +
                                      round_up(size_t(a.rows) * size_t(a.table_len) * 4));
  rows_kernel<<<unsigned(a.rows), 128, 0, stream>>>(a.start, a.block_table, a.table_len, lengths,
                                                    tables);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
  MlaDecodeArgs d;
  d.rows = a.rows;
  d.heads = a.heads;
  d.q_tilde = a.q_tilde;
  d.pages = a.pages;
  d.format = a.format;
  d.block_size = a.block_size;
  d.block_table = tables;
  d.table_stride = a.table_len;
  d.lengths = lengths;
  d.attended = nullptr;
  d.max_len = a.start + a.rows;
  d.scale = a.scale;
  d.workspace = ws;
  d.o_bar = a.o_bar;
  d.latent_dim = a.latent_dim;
  mla_decode(d, stream);
}

// ---- The prefill kernel -------------------------------------------------------------------------

constexpr int kR = kMlaLatentDim;
constexpr int kHeads = 64;  // MMA rows of a block: every head of its query row
constexpr int kTok = 64;    // list entries per latent tile
constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
constexpr int kLd = kR + 8;     // BF16 stride of q~ and latent rows (1040 B): 8 ldmatrix rows hit
                                // 8 distinct 16-byte bank groups
constexpr int kPLd = kTok + 8;  // BF16 probabilities (144 B rows, same property)
constexpr int kSLd = kTok + 8;  // FP32 scores: the float2 stores of a half warp hit 32 banks
constexpr int64_t kFp8Record = kR + 4 * (kR / 128);

constexpr size_t kQBytes = size_t(kHeads) * kLd * 2;
constexpr size_t kCBytes = size_t(kTok) * kLd * 2;
constexpr size_t kOffC = kQBytes;  // two latent tiles
constexpr size_t kOffP = kOffC + 2 * kCBytes;
constexpr size_t kOffS = kOffP + size_t(kHeads) * kPLd * 2;
constexpr size_t kOffAlpha = kOffS + size_t(kHeads) * kSLd * 4;
constexpr size_t kOffL = kOffAlpha + kHeads * 4;
constexpr size_t kOffRec = kOffL + kHeads * 4;  // two tiles of record addresses
constexpr size_t kSmemBytes = kOffRec + 2 * kTok * sizeof(void*);
static_assert(kSmemBytes <= 227 * 1024, "the H100/H200 opt-in limit per block");
static_assert(kOffC % 16 == 0 && kOffP % 16 == 0 && kOffS % 16 == 0 && kOffRec % 8 == 0,
              "ldmatrix, cp.async and float2 need aligned regions");

struct RowsArgs {
  int rows = 0;
  const float* q_tilde = nullptr;  // [rows, 64, R]
  const uint8_t* pages = nullptr;
  int block_size = 0;
  const int32_t* block_table = nullptr;  // row r's table at block_table + r * table_stride
  int64_t table_stride = 0;
  const int32_t* lengths = nullptr;   // [rows], or null: causal, row t attends start + t + 1
  const int32_t* attended = nullptr;  // [rows, max_len] positions, or null: entry j = position j
  int max_len = 0;
  int start = 0;
  float scale = 0.0f;
  float* o_bar = nullptr;  // [rows, 64, R]
};

// The fields MlaPrefillArgs and MlaDecodeArgs share.
template <typename Args>
RowsArgs rows_args(const Args& a) {
  RowsArgs r;
  r.rows = a.rows;
  r.q_tilde = a.q_tilde;
  r.pages = a.pages;
  r.block_size = a.block_size;
  r.block_table = a.block_table;
  r.scale = a.scale;
  r.o_bar = a.o_bar;
  return r;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// Four 8x8 BF16 matrices; lanes 8i .. 8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldsm_x4(uint32_t* r, const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t* r, const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// 16 bytes global -> shared, bypassing registers; src_bytes 0 writes zeros (unused slots).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)), "l"(src),
               "r"(src_bytes));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(f32_to_bf16_bits(lo)) | (uint32_t(f32_to_bf16_bits(hi)) << 16);
}

// Grid: one block per query row (longest causal rows first); block: 16 warps, all 64 heads.
// Tiling: the row's list in tiles of 64 entries; each tile's latents land in shared memory once
// (double buffered: cp.async for bf16, load and dequantize for fp8_g128) and serve
//   S[64 heads, 64 entries] = q~ C^T   warp w: heads 16(w%4).., entries 16(w/4).., k = 512
//   online softmax                     warp w: heads 4w .. 4w+3, lane: entries lane, lane + 32
//   ō[64 heads, 512] = a ō + P C       warp w: heads 32(w%2).., columns 64(w/2)..: 64 FP32
//                                      accumulators per thread, the whole ō stays in registers
// Why: one row's 64 heads share its entries, so a block per row reads each latent once (the
// decode kernel reads it once per 16 heads and per split, then merges splits through global
// memory); 64 heads x 64 entries per tile give every ldmatrix'd latent fragment 4 (scores) or 2
// (values) MMAs. No splits: each row's online softmax runs over its entries in order, so the
// result depends on the row alone. Shared memory: q~ 65 KB, 2 latent tiles 130 KB, P, S 27 KB.
template <bool kBf16>
__global__ void __launch_bounds__(kThreads, 1) prefill_kernel(const __grid_constant__ RowsArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  uint16_t* q = reinterpret_cast<uint16_t*>(smem);              // [64, kLd] BF16 q~
  uint16_t* cbuf = reinterpret_cast<uint16_t*>(smem + kOffC);   // [2][kTok, kLd] latents
  uint16_t* pr = reinterpret_cast<uint16_t*>(smem + kOffP);     // [64, kPLd] probabilities
  float* sc = reinterpret_cast<float*>(smem + kOffS);           // [64, kSLd] scores
  float* alpha_s = reinterpret_cast<float*>(smem + kOffAlpha);  // [64]
  float* l_s = reinterpret_cast<float*>(smem + kOffL);          // [64]
  const uint8_t** rec = reinterpret_cast<const uint8_t**>(smem + kOffRec);  // [2][kTok]
  constexpr int64_t kRecord = kBf16 ? 2 * kR : kFp8Record;

  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const bool causal = a.lengths == nullptr;
  const int row = causal ? a.rows - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int count = causal ? a.start + row + 1 : a.lengths[row];
  const int tiles = (count + kTok - 1) / kTok;
  const int32_t* list = a.attended ? a.attended + int64_t(row) * a.max_len : nullptr;
  const int32_t* table = a.block_table + int64_t(row) * a.table_stride;
  auto position = [&](int e) { return list ? __ldg(list + e) : e; };
  auto record = [&](int pos, int block) {
    return a.pages + (int64_t(block) * a.block_size + pos % a.block_size) * kRecord;
  };

  // Tile `tile` (addresses in rec[tile & 1]) into latent buffer tile & 1.
  auto load_tile = [&](int tile) {
    const uint8_t* const* r = rec + (tile & 1) * kTok;
    uint16_t* c = cbuf + (tile & 1) * kTok * kLd;
    if constexpr (kBf16) {
      constexpr int kChunks = kR / 8;  // 16-byte chunks of a record
#pragma unroll
      for (int i = 0; i < kTok * kChunks / kThreads; ++i) {
        const int idx = tid + i * kThreads, j = idx / kChunks, ch = idx % kChunks;
        const uint8_t* src = r[j];
        cp_async16(c + j * kLd + ch * 8, src ? src + ch * 16 : a.pages, src ? 16 : 0);
      }
      asm volatile("cp.async.commit_group;");
    } else {
      // E4M3 * scale rounded to BF16, as mla_decode's tiles; unused slots are zeros.
      constexpr int kChunks = kR / 16;
      constexpr int kPer = kTok * kChunks / kThreads;
      uint4 v[kPer];
      float s[kPer];
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int idx = tid + i * kThreads, j = idx / kChunks, ch = idx % kChunks;
        const uint8_t* src = r[j];
        v[i] = src ? *reinterpret_cast<const uint4*>(src + ch * 16) : make_uint4(0, 0, 0, 0);
        s[i] = src ? *reinterpret_cast<const float*>(src + kR + 4 * (ch * 16 / 128)) : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int idx = tid + i * kThreads, j = idx / kChunks, ch = idx % kChunks;
        const uint32_t u[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
        uint32_t packed[8];
#pragma unroll
        for (int e = 0; e < 8; ++e)
          packed[e] = pack_bf16(e4m3_to_f32(uint8_t(u[e / 2] >> (16 * (e % 2)))) * s[i],
                                e4m3_to_f32(uint8_t(u[e / 2] >> (16 * (e % 2) + 8))) * s[i]);
        uint4* dst = reinterpret_cast<uint4*>(c + j * kLd + ch * 16);
        dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
        dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
      }
    }
  };

  // Addresses of tiles 0 and 1 (entries 0 .. 127); tile 0 starts loading while q~ goes to BF16.
  if (tid < 2 * kTok) {
    const uint8_t* r = nullptr;
    if (tid < count) {
      const int pos = position(tid);
      r = record(pos, __ldg(table + pos / a.block_size));
    }
    rec[tid] = r;
  }
  __syncthreads();
  if (tiles > 0) load_tile(0);
  {
    const float4* src = reinterpret_cast<const float4*>(a.q_tilde + int64_t(row) * kHeads * kR);
#pragma unroll 8
    for (int i = 0; i < kHeads * kR / 4 / kThreads; ++i) {
      const int idx = tid + i * kThreads;
      const float4 v = src[idx];
      *reinterpret_cast<uint2*>(q + (idx * 4 / kR) * kLd + idx * 4 % kR) =
          make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
    }
  }

  float o[2][8][4];  // ō[heads 32(w%2) + 16i + .., columns 64(w/2) + 8j + ..] as MMA accumulators
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) o[i][j][0] = o[i][j][1] = o[i][j][2] = o[i][j][3] = 0.0f;
  float m_run[4], l_run[4];  // softmax state of heads 4w .. 4w+3 (the same in every lane)
#pragma unroll
  for (int i = 0; i < 4; ++i) m_run[i] = -INFINITY, l_run[i] = 0.0f;

  // Per-lane ldmatrix addresses (see the fragment layouts at mma_bf16 in device_math.cuh).
  const int mq = warp & 3, nq = warp >> 2;  // scores: heads 16 mq.., entries 16 nq..
  const int mh = warp & 1, cb = warp >> 1;  // values: heads 32 mh.., columns 64 cb..
  const uint16_t* qa = q + (16 * mq + (lane & 15)) * kLd + (lane >> 4) * 8;
  const int kb_off = (16 * nq + (lane >> 4) * 8 + (lane & 7)) * kLd + ((lane >> 3) & 1) * 8;
  const uint16_t* pa = pr + (32 * mh + (lane & 15)) * kPLd + (lane >> 4) * 8;
  const int vb_off = ((lane & 7) + ((lane >> 3) & 1) * 8) * kLd + 64 * cb + (lane >> 4) * 8;

  for (int tile = 0; tile < tiles; ++tile) {
    if constexpr (kBf16) asm volatile("cp.async.wait_group 0;" ::: "memory");
    // This tile's latents (every thread's copies), the previous tile consumed, and the addresses
    // of the next tile (and q~, on the first pass), all visible.
    __syncthreads();
    if (tile + 1 < tiles) load_tile(tile + 1);
    // Tile + 2's addresses go to rec[tile & 1] (this tile's copies are issued): the list read
    // here, the table read after the scores, the store after the softmax, so that two dependent
    // loads never stall the block.
    int pos = -1, block = 0;
    if (tid < kTok && (tile + 2) * kTok + tid < count) pos = position((tile + 2) * kTok + tid);
    const uint16_t* c = cbuf + (tile & 1) * kTok * kLd;
    const int n = min(kTok, count - tile * kTok);  // valid entries of the tile

    {  // S = scale q~ C^T for 16 heads x 16 entries; k in increasing order, as mla_decode.
      float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      const uint16_t* kb = c + kb_off;
#pragma unroll 2
      for (int k0 = 0; k0 < kR; k0 += 16) {
        uint32_t af[4], bf[4];
        ldsm_x4(af, qa + k0);
        ldsm_x4(bf, kb + k0);
        mma_bf16(s[0], af[0], af[1], af[2], af[3], bf[0], bf[1]);
        mma_bf16(s[1], af[0], af[1], af[2], af[3], bf[2], bf[3]);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float* d = sc + (16 * mq + g) * kSLd + 16 * nq + 8 * j + 2 * t;
        *reinterpret_cast<float2*>(d) = make_float2(a.scale * s[j][0], a.scale * s[j][1]);
        *reinterpret_cast<float2*>(d + 8 * kSLd) =
            make_float2(a.scale * s[j][2], a.scale * s[j][3]);
      }
    }
    if (pos >= 0) block = __ldg(table + pos / a.block_size);
    __syncthreads();
    // Online softmax. The sum uses the BF16-rounded probabilities that the PV product multiplies,
    // so ō stays a convex combination.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = 4 * warp + i;
      const float s0 = lane < n ? sc[h * kSLd + lane] : -INFINITY;
      const float s1 = lane + 32 < n ? sc[h * kSLd + lane + 32] : -INFINITY;
      const float m_new = fmaxf(m_run[i], warp_max(fmaxf(s0, s1)));
      const uint16_t p0 = lane < n ? f32_to_bf16_bits(expf(s0 - m_new)) : uint16_t(0);
      const uint16_t p1 = lane + 32 < n ? f32_to_bf16_bits(expf(s1 - m_new)) : uint16_t(0);
      const float alpha = expf(m_run[i] - m_new);  // 0 on the first tile (m = -inf)
      l_run[i] = l_run[i] * alpha + warp_sum(bf16_bits_to_f32(p0) + bf16_bits_to_f32(p1));
      m_run[i] = m_new;
      pr[h * kPLd + lane] = p0;
      pr[h * kPLd + lane + 32] = p1;
      if (lane == 0) alpha_s[h] = alpha;
    }
    if (tid < kTok) rec[(tile & 1) * kTok + tid] = pos >= 0 ? record(pos, block) : nullptr;
    __syncthreads();
    {  // ō = alpha ō + P C over this warp's 32 heads x 64 columns, entries in increasing order.
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float al = alpha_s[32 * mh + 16 * i + g], ah = alpha_s[32 * mh + 16 * i + g + 8];
#pragma unroll
        for (int j = 0; j < 8; ++j)
          o[i][j][0] *= al, o[i][j][1] *= al, o[i][j][2] *= ah, o[i][j][3] *= ah;
      }
      const uint16_t* vb = c + vb_off;
#pragma unroll
      for (int k0 = 0; k0 < kTok; k0 += 16) {
        uint32_t af[2][4];
        ldsm_x4(af[0], pa + k0);
        ldsm_x4(af[1], pa + 16 * kPLd + k0);
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
          uint32_t bf[4];  // b0, b1 of column tiles j and j + 1
          ldsm_x4_trans(bf, vb + k0 * kLd + j * 8);
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            mma_bf16(o[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[0], bf[1]);
            mma_bf16(o[i][j + 1], af[i][0], af[i][1], af[i][2], af[i][3], bf[2], bf[3]);
          }
        }
      }
    }
  }

  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) l_s[4 * warp + i] = l_run[i];
  }
  __syncthreads();
  // An empty row (length 0) attends nothing: ō = 0 rather than 0/0, as mla_decode.
  float* out = a.o_bar + int64_t(row) * kHeads * kR;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int h = 32 * mh + 16 * i + g;
    const float l0 = l_s[h], l1 = l_s[h + 8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = 64 * cb + 8 * j + 2 * t;
      *reinterpret_cast<float2*>(out + h * kR + col) =
          l0 > 0.0f ? make_float2(o[i][j][0] / l0, o[i][j][1] / l0) : make_float2(0.0f, 0.0f);
      *reinterpret_cast<float2*>(out + (h + 8) * kR + col) =
          l1 > 0.0f ? make_float2(o[i][j][2] / l1, o[i][j][3] / l1) : make_float2(0.0f, 0.0f);
    }
  }
}

void launch_prefill_kernel(const RowsArgs& r, LatentFormat format, cudaStream_t stream) {
  if (r.rows <= 0) return;
  static bool configured = false;  // the attribute is per function; setting it twice is harmless
  if (!configured) {
    SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(
        prefill_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
    SPARKGLM_CUDA_CHECK(cudaFuncSetAttribute(
        prefill_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
    configured = true;
  }
  if (format == LatentFormat::kBF16) {
    prefill_kernel<true><<<unsigned(r.rows), kThreads, kSmemBytes, stream>>>(r);
  } else {
    prefill_kernel<false><<<unsigned(r.rows), kThreads, kSmemBytes, stream>>>(r);
  }
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

size_t mla_prefill_workspace_bytes(int rows, int heads, int start, int table_len, int latent_dim) {
  return round_up(size_t(rows) * 4) + round_up(size_t(rows) * size_t(table_len) * 4) +
         size_t(mla_decode_workspace_floats(rows, heads, start + rows, latent_dim)) * 4;
}

bool mla_prefill_kernel_applies(int heads, int latent_dim) {
  if (latent_dim != kR) return false;
  static const bool fits = [] {  // sm_90: 227 KB per block; sm_120/121: 99 KB
    int device = 0, optin = 0;
    SPARKGLM_CUDA_CHECK(cudaGetDevice(&device));
    SPARKGLM_CUDA_CHECK(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    return size_t(optin) >= kSmemBytes;
  }();
  return heads == kHeads && fits;
}

void mla_prefill(const MlaPrefillArgs& a, cudaStream_t stream) {
  if (a.rows <= 0) return;
  if (a.start < 0 || a.block_size <= 0 ||
      int64_t(a.table_len) * a.block_size < int64_t(a.start) + a.rows)
    throw Error(ErrorKind::kInvalidArgument,
                "mla_prefill: table_len (" + std::to_string(a.table_len) + ") x block_size (" +
                    std::to_string(a.block_size) + ") must cover start + rows (" +
                    std::to_string(int64_t(a.start) + a.rows) + ") tokens");
  check_latent_geometry(a.latent_dim, a.format);
  if (a.decode_path || !mla_prefill_kernel_applies(a.heads, a.latent_dim)) {
    prefill_by_decode(a, stream);
    return;
  }
  RowsArgs r = rows_args(a);
  r.table_stride = 0;
  r.start = a.start;
  launch_prefill_kernel(r, a.format, stream);
}

void mla_prefill_lists(const MlaDecodeArgs& a, cudaStream_t stream) {
  if (a.rows <= 0) return;
  SPARKGLM_ASSERT(a.lengths != nullptr && a.block_size > 0, "mla_prefill_lists: lengths needed");
  if (!mla_prefill_kernel_applies(a.heads, a.latent_dim)) {
    mla_decode(a, stream);
    return;
  }
  RowsArgs r = rows_args(a);
  r.table_stride = a.table_stride;
  r.lengths = a.lengths;
  r.attended = a.attended;
  r.max_len = a.max_len;
  launch_prefill_kernel(r, a.format, stream);
}

}  // namespace sparkglm::cuda
