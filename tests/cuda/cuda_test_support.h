#pragma once
// What the CUDA operator tests share: whether a device is present, deterministic inputs,
// host/device copies, and the normalised error they compare with the CPU reference.
#include <cuda_runtime.h>

#include <vector>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
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

}  // namespace sparkglm::cuda_test
