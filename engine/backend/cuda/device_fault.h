#pragma once
// A test hook (--inject-device-fault-after-steps): a real sticky device fault, so that the path a
// production fault takes (the runner's checks, the engine going fatal, the server answering 503
// and exiting) can be exercised on purpose.
#include <cuda_runtime.h>

namespace sparkglm::cuda {

// Launches a kernel that writes through an address no allocation holds and waits for it. Returns
// what the wait reported (cudaErrorIllegalAddress); the context is poisoned from then on, and every
// later CUDA call of this process fails with that error.
cudaError_t provoke_illegal_address();

}  // namespace sparkglm::cuda
