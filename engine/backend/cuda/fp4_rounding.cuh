#pragma once
// Device ports of weight_quantizer.cpp's element rounding, step for step (FP64 quotients rounded
// once, ties to the even code; rint is nearbyint under the default rounding mode), and of its
// NVFP4 block rule: what the device quantizer (device_quantizer.h) and spark's activation
// quantizer (fp4_activation.h) share, so that both write the CPU's codes bit for bit.
#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/device_math.cuh"
#include "engine/backend/cuda/scale_codes.cuh"

namespace sparkglm::cuda::fp4 {

constexpr int kNvBlock = 16;
constexpr double kE4m3Max = 448.0;
constexpr double kE2m1Max = 6.0;

// weight_quantizer.cpp's round_e4m3: the E4M3fn code of x, saturating at 448.
__device__ inline uint8_t round_e4m3(double x) {
  if (isnan(x)) return 0x7f;
  const uint8_t sign = signbit(x) ? 0x80 : 0x00;
  const double a = fabs(x);
  if (a >= kE4m3Max) return uint8_t(sign | 0x7e);
  int e;
  frexp(a, &e);
  const int binade = e - 1 > -6 ? e - 1 : -6;  // subnormals share the quantum of 2^-6
  const double quantum = ldexp(1.0, binade - 3);
  const double q = rint(a / quantum) * quantum;
  if (q == 0.0) return sign;
  if (q >= kE4m3Max) return uint8_t(sign | 0x7e);
  int qe;
  const double qm = frexp(q, &qe);
  if (qe - 1 < -6) return uint8_t(sign | uint8_t(ldexp(q, 9)));
  const uint8_t exp_field = uint8_t(qe - 1 + 7);
  const uint8_t man_field = uint8_t(ldexp(qm * 2.0 - 1.0, 3));
  return uint8_t(sign | (exp_field << 3) | man_field);
}

// weight_quantizer.cpp's round_e2m1: the E2M1 code (sign bit 3), saturating at 6.
__device__ inline uint8_t round_e2m1(double x) {
  const uint8_t sign = signbit(x) ? 0x8 : 0x0;
  const double a = fabs(x);
  if (a >= kE2m1Max) return uint8_t(sign | 7);
  const double quantum = a < 2.0 ? 0.5 : (a < 4.0 ? 1.0 : 2.0);
  const double q = rint(a / quantum) * quantum;
  // Magnitudes by code: 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  const uint8_t code =
      q < 2.0 ? uint8_t(q * 2.0) : (q == 2.0 ? 4 : (q == 3.0 ? 5 : (q == 4.0 ? 6 : 7)));
  return uint8_t(sign | code);
}

// weight_quantizer.cpp's nvfp4_block for the n <= 16 values x with global scale scale_2: returns
// the block's E4M3 scale code and writes the E2M1 codes (a block whose scale rounds to 0 gets
// zeros). The FP32 block amax is exact in any order.
__device__ inline uint8_t nvfp4_block(const float* x, int n, float scale_2, uint8_t* codes) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const uint8_t scale_code = round_e4m3(double(amax) / (kE2m1Max * double(scale_2)));
  const double d = double(e4m3_to_f32(scale_code)) * double(scale_2);  // exact in FP64
  for (int i = 0; i < n; ++i) codes[i] = d > 0.0 ? round_e2m1(double(x[i]) / d) : 0;
  return scale_code;
}

// round_trip_nvfp4 of one block of n <= 16 values, in place: x[i] becomes q[i] = e2m1 * e4m3
// block scale, exact in FP32 and in BF16 (at most 2 + 4 significant bits, magnitudes 2^-10 ..
// 2688). The CPU's round-trip value is q[i] * scale_2, rounded once in FP32.
__device__ inline void nvfp4_round_block(float* x, int n, float scale_2) {
  uint8_t codes[kNvBlock];
  const float scale = e4m3_to_f32(nvfp4_block(x, n, scale_2, codes));
  for (int i = 0; i < n; ++i) x[i] = e2m1_to_f32_dev(codes[i]) * scale;
}

}  // namespace sparkglm::cuda::fp4
