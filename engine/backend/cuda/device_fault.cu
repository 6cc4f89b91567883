#include "engine/backend/cuda/device_fault.h"

#include <cstdint>

namespace sparkglm::cuda {

namespace {

__global__ void write_through(int* address) {
  *address = 1;
}

}  // namespace

cudaError_t provoke_illegal_address() {
  // The first page is never mapped on the device: the write faults as an illegal address.
  int* nowhere = reinterpret_cast<int*>(uintptr_t(64));
  write_through<<<1, 1>>>(nowhere);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return launched;
  return cudaDeviceSynchronize();
}

}  // namespace sparkglm::cuda
