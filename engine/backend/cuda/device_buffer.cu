#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"

#include <utility>

namespace sparkglm::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) SPARKGLM_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_)
    cudaFree(data_);  // no throw from a destructor; a failure here is reported by the next call
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::copy_from_host(const void* src, size_t bytes) {
  SPARKGLM_ASSERT(bytes <= bytes_, "copy larger than the device buffer");
  SPARKGLM_CUDA_CHECK(cudaMemcpy(data_, src, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::copy_to_host(void* dst, size_t bytes) const {
  SPARKGLM_ASSERT(bytes <= bytes_, "copy larger than the device buffer");
  SPARKGLM_CUDA_CHECK(cudaMemcpy(dst, data_, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace sparkglm::cuda
