#pragma once
// Small device helpers shared by the operator kernels: BF16/E4M3 conversions with the CPU's exact
// rounding (core/dtype.h), and warp reductions in a fixed butterfly order so that a sum never
// depends on launch shape.
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
  return __uint_as_float(uint32_t(h) << 16);
}

// Round to nearest even, NaN kept quiet: core/dtype.h's f32_to_bf16 step for step.
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// E4M3 "fn" (no infinities, 0x7f/0xff NaN), exact.
__device__ __forceinline__ float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = (b & 0x80u) << 24;
  const uint32_t exp = (b >> 3) & 0xfu;
  const uint32_t man = b & 0x7u;
  if (exp == 0xfu && man == 0x7u) return __uint_as_float(0x7fc00000u | sign);
  const float mag = exp == 0 ? float(man) * 0.001953125f  // subnormal: man/8 * 2^-6
                             : __uint_as_float(((exp + 120u) << 23) | (man << 20));
  return __uint_as_float(__float_as_uint(mag) | sign);
}

__device__ __forceinline__ float sigmoidf_dev(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// Sum over the 32 lanes by xor butterfly (16, 8, 4, 2, 1): every lane gets the same bits.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// Block-wide sum for blockDim.x a multiple of 32 (<= 1024); `scratch` holds 32 floats. Lane sums
// combine in warp order, so the result is fixed for a given blockDim.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

// D += A B for one mma.m16n8k16 (BF16 operands, FP32 accumulate); fragments as the PTX ISA lays
// them out (g = lane / 4, t = lane % 4): a0 = A[g][2t..2t+1], a1 = A[g+8][..], a2 = A[g][2t+8..],
// a3 = A[g+8][2t+8..]; b0 = B[2t..2t+1][g], b1 = B[2t+8..][g]; c = C[g][2t..], C[g+8][2t..].
// Not volatile, so that loads of later blocks may be scheduled ahead of it.
__device__ __forceinline__ void mma_bf16(float* c, uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// A 16-byte read of data read once (weights): the read-only path, no L1 allocation.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

}  // namespace sparkglm::cuda
