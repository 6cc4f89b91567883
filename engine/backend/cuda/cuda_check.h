#pragma once
// Every CUDA runtime call is checked: a failure becomes an Error naming the call and the site.
#include <cuda_runtime.h>

#include <string>

#include "engine/core/error.h"

namespace sparkglm::cuda {

inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess)
    throw Error(ErrorKind::kUnsupported, std::string(call) + " failed at " + file + ":" +
                                             std::to_string(line) + ": " +
                                             cudaGetErrorString(status));
}

}  // namespace sparkglm::cuda

#define SPARKGLM_CUDA_CHECK(call) ::sparkglm::cuda::check((call), #call, __FILE__, __LINE__)
