#pragma once
// Every CUDA runtime call is checked: a failure becomes an Error naming the call and the site, of a
// kind that says what the caller may do next:
//   kDeviceFatal  a sticky error (an illegal address, a failed launch, an uncorrectable ECC error,
//                 ...): the CUDA runtime documents that the context is then unusable and every
//                 later call returns the same error until the process restarts;
//   kCapacity     the device ran out of memory (cudaErrorMemoryAllocation): the context is fine;
//   kUnsupported  anything else (a bad argument, a missing feature): the context is fine.
// A non-sticky error is also taken out of the runtime's last-error slot, so that the next launch
// check (cudaGetLastError) does not report it a second time against an innocent kernel.
#include <cuda_runtime.h>

#include <string>

#include "engine/core/error.h"

namespace sparkglm::cuda {

// True for the errors that poison the context (the runtime's "sticky" errors).
bool is_sticky(cudaError_t status);
ErrorKind error_kind(cudaError_t status);

[[noreturn]] void fail(cudaError_t status, const std::string& call, const char* file, int line);

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) fail(status, call, file, line);
}

// After a library call (cuBLAS, ...) failed with its own status: the sticky error behind it when
// the context is poisoned, else cudaSuccess. Never blocks.
cudaError_t pending_sticky_error();

}  // namespace sparkglm::cuda

#define SPARKGLM_CUDA_CHECK(call) ::sparkglm::cuda::check((call), #call, __FILE__, __LINE__)
