#include "engine/backend/sm121/fp4_mma_experts.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/fp4_rounding.cuh"

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM121_ALL) || \
    defined(__CUDA_ARCH_FEAT_SM120_ALL)
#else
#error "fp4_mma_experts.cu is built for sm_121a only (SPARKGLM_CUDA_SM121)"
#endif

namespace sparkglm::sm121 {

namespace {

constexpr int kGroup = 8;  // pairs per group: the MMA's 8 columns (moe_decode_device.cuh)
constexpr int kK = 64;     // k per MMA

// D += (A * SFA) (B * SFB) over 64 k. Fragments (g = lane / 4, t = lane % 4), 8 E2M1 per
// register, low nibble first: a0 = A[g][8t..8t+7], a1 = A[g+8][8t..], a2 = A[g][32+8t..],
// a3 = A[g+8][32+8t..]; b0 = B[8t..8t+7][g], b1 = B[32+8t..][g]. sfa: the 4 UE4M3 scales (k
// 0-15, 16-31, 32-47, 48-63, low byte first) of A row g (t == 0) or g + 8 (t == 1); sfb: those of
// B column g; byte and thread selectors 0 (CUTLASS's SM120 block-scaled atoms).
__device__ __forceinline__ void mma_nvfp4(float* d, const uint32_t* a, const uint32_t* b,
                                          uint32_t sfa, uint32_t sfb) {
  const uint16_t sel = 0;
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1."
      "f32.ue4m3 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {%11,%12}, %13, "
      "{%14,%15};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sfa), "h"(sel),
        "h"(sel), "r"(sfb), "h"(sel), "h"(sel));
}

__device__ __forceinline__ uint32_t load_u32(const uint8_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Grid: (rows / 16, max groups), one warp: 16 W rows against the group's 8 pairs.
__global__ void __launch_bounds__(32) product_kernel(const __grid_constant__ Fp4ExpertProduct p) {
  if (int(blockIdx.y) >= p.groups[0]) return;
  const int32_t* grp = p.groups + 1 + int64_t(blockIdx.y) * (1 + kGroup);
  const int e = grp[0];
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  const int pair = grp[1 + g];
  const int64_t n0 = int64_t(blockIdx.x) * 16;
  const uint8_t* w = p.w_packed[e];
  const uint8_t* ws = p.w_scale[e];
  const int64_t row_a = n0 + g, row_b = n0 + g + 8, row_s = t == 1 ? row_b : row_a;
  float acc[4] = {0, 0, 0, 0};
  for (int64_t k0 = 0; k0 < p.k; k0 += kK) {
    const uint32_t a[4] = {load_u32(w + row_a * (p.k / 2) + (k0 + 8 * t) / 2),
                           load_u32(w + row_b * (p.k / 2) + (k0 + 8 * t) / 2),
                           load_u32(w + row_a * (p.k / 2) + (k0 + 32 + 8 * t) / 2),
                           load_u32(w + row_b * (p.k / 2) + (k0 + 32 + 8 * t) / 2)};
    uint32_t b[2] = {0, 0}, sfb = 0;
    if (pair >= 0) {
      b[0] = load_u32(p.x_packed + pair * (p.k / 2) + (k0 + 8 * t) / 2);
      b[1] = load_u32(p.x_packed + pair * (p.k / 2) + (k0 + 32 + 8 * t) / 2);
      sfb = load_u32(p.x_scale + pair * (p.k / 16) + k0 / 16);
    }
    const uint32_t sfa = load_u32(ws + row_s * (p.k / 16) + k0 / 16);
    mma_nvfp4(acc, a, b, sfa, sfb);
  }
  const float s = p.w_global[e] * p.x_global[e];
  for (int c = 0; c < 2; ++c) {  // this lane's columns 2t, 2t + 1
    const int q = grp[1 + 2 * t + c];
    if (q < 0) continue;
    p.y[q * p.rows + row_a] = acc[c] * s;
    p.y[q * p.rows + row_b] = acc[2 + c] * s;
  }
}

// One thread per 16-value block: the codes of fp4_rounding.cuh's block rule, packed.
__global__ void pack_kernel(const float* x, int64_t rows, int64_t n, const float* scale_2,
                            uint8_t* packed, uint8_t* scale) {
  const int64_t per = n / cuda::fp4::kNvBlock;
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < rows * per;
       b += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = b / per, first = b * cuda::fp4::kNvBlock;
    float v[cuda::fp4::kNvBlock];
    for (int i = 0; i < cuda::fp4::kNvBlock; ++i) v[i] = x[first + i];
    uint8_t codes[cuda::fp4::kNvBlock];
    scale[b] = cuda::fp4::nvfp4_block(v, cuda::fp4::kNvBlock, scale_2[row], codes);
    for (int i = 0; i < cuda::fp4::kNvBlock; i += 2)
      packed[(first + i) / 2] = uint8_t(codes[i] | (codes[i + 1] << 4));
  }
}

}  // namespace

void fp4_pack_rows(const float* x, int64_t rows, int64_t n, const float* scale_2, uint8_t* packed,
                   uint8_t* scale, cudaStream_t stream) {
  SPARKGLM_ASSERT(n % cuda::fp4::kNvBlock == 0, "fp4_pack_rows: n a multiple of 16");
  const int64_t blocks = rows * (n / cuda::fp4::kNvBlock);
  if (blocks == 0) return;
  const int64_t grid = (blocks + 255) / 256;
  pack_kernel<<<unsigned(grid < 65536 ? grid : 65536), 256, 0, stream>>>(x, rows, n, scale_2,
                                                                         packed, scale);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

void fp4_expert_product(const Fp4ExpertProduct& p, unsigned max_groups, cudaStream_t stream) {
  SPARKGLM_ASSERT(p.k % kK == 0 && p.rows % 16 == 0 && p.groups,
                  "fp4_expert_product: k a multiple of 64, rows of 16, groups given");
  if (max_groups == 0) return;
  product_kernel<<<dim3(unsigned(p.rows / 16), max_groups), 32, 0, stream>>>(p);
  SPARKGLM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sparkglm::sm121
