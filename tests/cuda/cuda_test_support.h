#pragma once
// What the CUDA operator tests share: whether a device is present, deterministic inputs,
// host/device copies, latent records, and the normalised error they compare with the CPU reference.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/mla_decode.h"
#include "engine/core/dtype.h"
#include "tinyglm/dummy_hash.h"

namespace sparkglm::cuda_test {

inline bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

inline std::vector<float> uniform(uint64_t key, size_t n, float center, float half) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = dummy::value(key, i, center, half);
  return v;
}

template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
  cuda::DeviceBuffer b(v.size() * sizeof(T) + 16);
  b.copy_from_host(v.data(), v.size() * sizeof(T));
  return b;
}

template <typename T>
std::vector<T> to_host(const cuda::DeviceBuffer& b, size_t n) {
  SPARKGLM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> v(n);
  b.copy_to_host(v.data(), n * sizeof(T));
  return v;
}

inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return num / den;
}

// One token's latent record (runtime/latent_cache.h layouts) from its r values v: bf16, or
// fp8_g128 (E4M3 of v / scale then one FP32 scale per 128 values, scale = amax / 448); `back`
// gets the values the record decodes to.
inline void encode_latent(cuda::LatentFormat format, const float* v, int r, uint8_t* out,
                          float* back) {
  if (format == cuda::LatentFormat::kBF16) {
    for (int i = 0; i < r; ++i) {
      const uint16_t h = f32_to_bf16(v[i]);
      std::memcpy(out + 2 * i, &h, 2);
      back[i] = bf16_to_f32(h);
    }
    return;
  }
  for (int g = 0; g < r / 128; ++g) {
    float amax = 0.0f;
    for (int i = g * 128; i < g * 128 + 128; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float scale = amax / 448.0f;
    for (int i = g * 128; i < g * 128 + 128; ++i) {
      out[i] = f32_to_e4m3(v[i] / scale);
      back[i] = e4m3_to_f32(out[i]) * scale;
    }
    std::memcpy(out + r + 4 * g, &scale, 4);
  }
}

}  // namespace sparkglm::cuda_test
