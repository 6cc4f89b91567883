#pragma once
// The dummy-weight function: value(seed, tensor name, element index), a pure counter-based
// function that the CPU and the GPU evaluate to the same bits.
//
//   name_key(name)  = FNV-1a 64 over the name's bytes
//   tensor_key      = mix64(mix64(seed) ^ name_key)
//   bits(i)         = mix64(tensor_key + (i + 1) * 0x9E3779B97F4A7C15)     (64-bit wrap-around)
//   s(i)            = float(bits(i) >> 40) * 2^-23 - 1                       (exact; in [-1, 1))
//   value(i)        = center + half_width * s(i)   (FP32: one rounded multiply, one rounded add)
//
// mix64 is SplitMix64's finaliser. The value is then stored in the tensor's dtype with
// round-to-nearest-even. Device code must not fuse the multiply and add (use __fmul_rn/__fadd_rn
// or --fmad=false) or the bits differ from the CPU's.
#include <cstdint>
#include <string_view>

#if defined(__CUDACC__)
#define SPARKGLM_HD __host__ __device__
#else
#define SPARKGLM_HD
#endif

namespace sparkglm::dummy {

SPARKGLM_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t name_key(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

inline uint64_t tensor_key(uint64_t seed, std::string_view name) {
  return mix64(mix64(seed) ^ name_key(name));
}

// Uniform in [-1, 1) with 24 random bits; exact in FP32.
SPARKGLM_HD inline float uniform_pm1(uint64_t key, uint64_t index) {
  const uint64_t bits = mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull);
  return float(uint32_t(bits >> 40)) * (1.0f / 8388608.0f) - 1.0f;
}

SPARKGLM_HD inline float value(uint64_t key, uint64_t index, float center, float half_width) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(center, __fmul_rn(half_width, uniform_pm1(key, index)));
#else
  const float t = half_width * uniform_pm1(key, index);
  return center + t;
#endif
}

}  // namespace sparkglm::dummy
