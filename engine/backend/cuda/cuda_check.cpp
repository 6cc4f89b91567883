#include "engine/backend/cuda/cuda_check.h"

namespace sparkglm::cuda {

bool is_sticky(cudaError_t status) {
  switch (status) {
    // driver_types.h documents each of these as leaving the process in an inconsistent state
    // that only a restart clears.
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
#if CUDART_VERSION >= 12080  // named by the toolkits the project supports (12.8 for GB10, 13.x)
    case cudaErrorContained:
    case cudaErrorTensorMemoryLeak:
#endif
    // Uncorrectable hardware errors: what the device computed can no longer be trusted.
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
      return true;
    default:
      return false;
  }
}

ErrorKind error_kind(cudaError_t status) {
  if (is_sticky(status)) return ErrorKind::kDeviceFatal;
  if (status == cudaErrorMemoryAllocation) return ErrorKind::kCapacity;
  return ErrorKind::kUnsupported;
}

void fail(cudaError_t status, const std::string& call, const char* file, int line) {
  // A sticky error stays where it is (every later call reports it anyway); any other is cleared.
  if (!is_sticky(status)) (void)cudaGetLastError();
  throw Error(error_kind(status), call + " failed at " + file + ":" + std::to_string(line) + ": " +
                                      cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

cudaError_t pending_sticky_error() {
  const cudaError_t last = cudaPeekAtLastError();
  if (is_sticky(last)) return last;
  // A poisoned context answers every call, this cheap one included, with its sticky error.
  const cudaError_t query = cudaStreamQuery(nullptr);
  return is_sticky(query) ? query : cudaSuccess;
}

}  // namespace sparkglm::cuda
