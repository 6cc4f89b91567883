#pragma once
// Exact BF16 pairs of FP4-Local codes for the MMA's A fragments (quantized_linear.cu,
// moe_quant_experts.cu), in a few integer / BF16x2 instructions per pair instead of a float
// decode per element:
//   E2M1   a byte of two codes (low nibble = the lower column) -> its BF16 pair by one lookup in a
//          256-entry table in shared memory (one copy per lane: a warp's 32 lookups hit 32 banks)
//   E4M3   bytes moved into BF16 bit positions, one BF16x2 FMA by 2^120 (see e4m3_pair02)
//   scale  one BF16x2 FMA by a BF16 pair of the scale and -0: exact wherever the product is a BF16
//          value (each caller states why it is), so the bits equal the FP32 product's top half.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/scale_codes.cuh"

namespace sparkglm::cuda {

// d = a * b + (-0) on BF16 pairs, rounded to nearest: a * b exactly when that is a BF16 value
// (adding -0 keeps every value, +0 and -0 included).
__device__ __forceinline__ uint32_t bf16x2_mul_exact(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// The BF16 pair (s, s) of an FP32 value s that BF16 holds exactly (its top 16 bits); NaN stays NaN.
__device__ __forceinline__ uint32_t bf16x2_splat_exact(float s) {
  const uint32_t h = __float_as_uint(s) >> 16;
  return h | (h << 16);
}

// E4M3 bytes 0 and 2 (pair02) or 1 and 3 (pair13) of u as a BF16 pair (low half = the lower
// byte), exactly. Moving an E4M3 code's 7 magnitude bits to BF16 bits 4..10 gives the value times
// 2^-120 (BF16 subnormals carry E4M3's subnormals); one BF16x2 FMA by 2^120 (+ -0) rescales it
// exactly. The NaN codes 0x7f / 0xff are not special-cased: they read as +-480 (no quantizer
// emits them).
__device__ __forceinline__ uint32_t e4m3_pair02(uint32_t u) {
  return bf16x2_mul_exact(((u << 4) & 0x07f007f0u) | ((u << 8) & 0x80008000u), 0x7b807b80u);
}
__device__ __forceinline__ uint32_t e4m3_pair13(uint32_t u) {
  return bf16x2_mul_exact(((u >> 4) & 0x07f007f0u) | (u & 0x80008000u), 0x7b807b80u);
}

// The four E4M3 bytes of u as two BF16 pairs of adjacent bytes: p[0] = (byte 0, byte 1), p[1] =
// (byte 2, byte 3), each exact as e4m3_pair02 makes them.
__device__ __forceinline__ void e4m3_adjacent_pairs(uint32_t u, uint32_t* p) {
  const uint32_t even = e4m3_pair02(u), odd = e4m3_pair13(u);
  p[0] = __byte_perm(even, odd, 0x5410);
  p[1] = __byte_perm(even, odd, 0x7632);
}

// The E2M1 pair table: entry b (0..255) of lane l at word b * 32 + l, the BF16 pair (e2m1(b &
// 0xf), e2m1(b >> 4)). E2M1 values (0, +-0.5 .. +-6, -0 for code 8) have at most two significant
// bits, so the top half of e2m1_to_f32_dev's FP32 bits is the exact BF16 value.
constexpr int kE2m1TableWords = 256 * 32;  // 32 KB

// Every thread of the block writes its share; the caller synchronises before the first lookup.
// 2048 16-byte stores: each is one entry for four consecutive lanes.
__device__ __forceinline__ void fill_e2m1_table(uint32_t* table) {
  for (int i = int(threadIdx.x); i < kE2m1TableWords / 4; i += int(blockDim.x)) {
    const uint32_t b = uint32_t(i) >> 3;  // 8 stores an entry
    const uint32_t lo = __float_as_uint(e2m1_to_f32_dev(b & 0xfu)) >> 16;
    const uint32_t hi = __float_as_uint(e2m1_to_f32_dev(b >> 4)) >> 16;
    const uint32_t pair = lo | (hi << 16);
    reinterpret_cast<uint4*>(table)[i] = make_uint4(pair, pair, pair, pair);
  }
}

// The BF16 pair of byte `j` (0..3) of u from this lane's column of the table (table + lane).
__device__ __forceinline__ uint32_t e2m1_pair(const uint32_t* lane_table, uint32_t u, int j) {
  return lane_table[((u >> (8 * j)) & 0xffu) * 32u];
}

}  // namespace sparkglm::cuda
