#pragma once
// Asynchronous 16-byte copies from global to shared memory (cp.async, sm_80 and later): the loads
// of a pipeline stage are issued together, land in shared memory without passing through
// registers, and are waited for by group. Used by the tile GEMM (grouped_gemm.cu) and the
// quantized decode GEMV (quantized_linear.cu).
#include <cuda_runtime.h>

#include <cstdint>

namespace sparkglm::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; src-size 0 (valid false) writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

// Closes the group of copies issued since the last commit (an empty group counts too).
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most kPending of this thread's groups are still in flight. Other threads see the
// bytes only after a barrier (__syncwarp or __syncthreads) that follows the wait.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace sparkglm::cuda
